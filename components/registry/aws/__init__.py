"""The registry on AWS: the protected bucket and its grants."""
