"""Which machine image a training node boots, by accelerator kind (pure data, no pulumi).

The AWS Deep Learning AMIs publish their latest image id in public SSM parameters, so a stack
resolves the id at deploy time instead of pinning one that goes stale:

- GPU (p4d, p4de, p5, p5e, p5en): "Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.9 (Ubuntu 24.04)":
  NVIDIA driver, CUDA, EFA installer, aws-ofi-nccl and PyTorch in /opt/pytorch. Release notes list
  P4d/P4de/P5/P5e/P5en as supported; parameter name pattern from the DLAMI guide ("Find the ID of a
  DLAMI": /aws/service/deeplearning/ami/<arch>/<ami-type>/latest/ami-id).
- Neuron (trn1, trn1n, trn2): "Deep Learning AMI Neuron PyTorch 2.8 (Ubuntu 22.04)": Neuron driver,
  runtime, EFA and torch-neuronx in /opt/aws_neuronx_venv_pytorch_2_8 (Neuron DLAMI user guide,
  "SSM Parameter Prefix" table: <prefix>/latest/image_id).

Both images are Ubuntu, whose root device is /dev/sda1; the stack still reads the root device name
from the image itself (ec2 getAmi), so an `amiId` override with another layout works.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.catalog.aws import InstanceType


@dataclass(frozen=True)
class NodeImage:
    ssm_parameter: str  # public SSM parameter holding the latest image id
    torchrun: str  # absolute path of torchrun on the image
    description: str


GPU_IMAGE = NodeImage(
    ssm_parameter="/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.9-ubuntu-24.04/latest/ami-id",
    torchrun="/opt/pytorch/bin/torchrun",
    description="Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.9 (Ubuntu 24.04)",
)
NEURON_IMAGE = NodeImage(
    ssm_parameter="/aws/service/neuron/dlami/pytorch-2.8/ubuntu-22.04/latest/image_id",
    torchrun="/opt/aws_neuronx_venv_pytorch_2_8/bin/torchrun",
    description="Deep Learning AMI Neuron PyTorch 2.8 (Ubuntu 22.04)",
)


def node_image(itype: InstanceType) -> NodeImage:
    """The Deep Learning AMI for the accelerators of `itype`."""
    kind = itype.accelerator_kind
    if kind == "gpu":
        return GPU_IMAGE
    if kind == "neuron":
        return NEURON_IMAGE
    raise ValueError(f"{itype.name} has no GPU or Neuron accelerators; no training image for it")
