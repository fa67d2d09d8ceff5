"""Which machine image a training node boots, by accelerator kind (pure data, no pulumi).

The AWS Deep Learning AMIs publish their latest image id in public SSM parameters, so a stack
resolves the id at deploy time instead of pinning one that goes stale. The images, and every fact the
node bootstrap relies on in them with its source, are catalog data (infra/catalog/data/aws_node_images.json):

- GPU (p4d, p4de, p5, p5e, p5en): "Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.9 (Ubuntu 24.04)":
  NVIDIA driver, CUDA, EFA installer, aws-ofi-nccl and PyTorch 2.9 in /opt/pytorch. Parameter name pattern
  from the DLAMI guide ("Find the ID of a DLAMI": /aws/service/deeplearning/ami/<arch>/<ami-type>/latest/ami-id).
- Neuron (trn1, trn1n, trn2): "Deep Learning AMI Neuron PyTorch 2.8 (Ubuntu 22.04)": Neuron driver,
  runtime, EFA and torch-neuronx in /opt/aws_neuronx_venv_pytorch_2_8 (Neuron DLAMI user guide,
  "SSM Parameter Prefix" table: <prefix>/latest/image_id).

Both images are Ubuntu, whose root device is /dev/sda1; the stack still reads the root device name
from the image itself (ec2 getAmi), so an `amiId` override with another layout works.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from infra.catalog.aws import InstanceType
from infra.catalog.aws.node_images import DlamiFacts, dlami_facts


@dataclass(frozen=True)
class NodeImage:
    ssm_parameter: str  # public SSM parameter holding the latest image id
    torchrun: str  # absolute path of torchrun on the image
    description: str
    facts: DlamiFacts  # what the bootstrap checks on the node before it relies on the image


@cache
def image_for(kind: str) -> NodeImage:
    """The Deep Learning AMI for accelerator kind `kind` ("gpu" or "neuron"), from the catalog."""
    facts = dlami_facts(kind)
    return NodeImage(facts.ssm_parameter, facts.torchrun, facts.description, facts)


def node_image(itype: InstanceType) -> NodeImage:
    """The Deep Learning AMI for the accelerators of `itype`."""
    kind = itype.accelerator_kind
    if kind not in ("gpu", "neuron"):
        raise ValueError(f"{itype.name} has no GPU or Neuron accelerators; no training image for it")
    return image_for(kind)
