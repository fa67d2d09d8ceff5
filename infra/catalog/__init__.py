"""Facts as data, each with its source and as-of date: EC2 instances and the training images' facts (aws), GCP
machines (gcp), the stack kinds' accepted types (roles), service prices (services) and the fabric gate's floors
and A3's NCCL plugins (fabric). Pure: no pulumi, no I/O until a lookup."""
