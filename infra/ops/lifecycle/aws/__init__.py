"""The lifecycle's AWS side: RunCloud over boto3 and the audit's direct describes."""
