"""The registry on AWS: the S3 bucket's config."""
