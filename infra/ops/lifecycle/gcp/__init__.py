"""The lifecycle's GCP side: Google's REST APIs and RunCloud over them."""
