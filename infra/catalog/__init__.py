"""Facts as data, each with its source and as-of date: EC2 instances (aws), GCP machines (gcp), the
stack kinds' accepted types (roles) and service prices (services). Pure: no pulumi, no I/O until a lookup."""
