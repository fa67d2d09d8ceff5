"""Pure logic of the `serving` stack kind: node pool plans, pinned charts, model server manifests, IAM
documents and the kubeconfig. No pulumi resources are declared here; components wire these."""
