"""Stack builders on AWS, one per kind."""
