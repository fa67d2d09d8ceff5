"""How each artefact variant is built (facts as data): the hardware it is built on, the image, the
conversion command, and what the manifest records about it.

The commands run inside the variant's image on the variant's hardware; they read the checkpoint from
/work/checkpoint and write the artefact to /work/out. They have not been run from this repository
(no accelerators here): see the README's "Promotion" section.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.serving.servers import NEURON_SCHEDULER


@dataclass(frozen=True)
class Recipe:
    variant: str
    accelerator: str  # serving node pool it is built on (and served on)
    resource: str  # extended resource the conversion requests
    scheduler_name: str | None
    image: str
    format: str
    precision: str
    convert: str  # shell: /work/checkpoint -> /work/out
    compiler_version: str  # shell printing the compiler's version
    runtime_version: str  # shell printing the serving runtime's version
    # Sizing of the `convert` step from the checkpoint's size S in GiB (sizing.py): estimates, not measurements.
    cpu: int  # cores requested (the compilers use more when the node has them: no CPU limit)
    memory_factor: float  # memory = memory_factor * S + memory_base_gib
    memory_base_gib: float
    disk_factor: float  # work volume = disk_factor * S + disk_base_gib (checkpoint, intermediates, artefact)
    disk_base_gib: float


_PY = "python3 -c"
RECIPES = {
    "neuron": Recipe(
        "neuron",
        "inf2",
        "aws.amazon.com/neuron",
        NEURON_SCHEDULER,
        "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py310-sdk2.25.0-ubuntu22.04",
        format="neuron-compiled (NEFF, optimum-neuron export)",
        precision="bf16",
        convert="optimum-cli export neuron --model /work/checkpoint --batch_size 1 --sequence_length 4096 "
        "--auto_cast_type bf16 --num_cores 2 /work/out",
        compiler_version=f"{_PY} 'import neuronxcc; print(neuronxcc.__version__)'",
        runtime_version=f"{_PY} 'import vllm; print(vllm.__version__)'",
        # The compile traces the model on the host (weights plus graphs) and neuronx-cc is memory-hungry;
        # the export holds the compiled graphs and a copy of the weights.
        cpu=4,
        memory_factor=2.0,
        memory_base_gib=8,
        disk_factor=2.5,
        disk_base_gib=10,
    ),
    "cuda": Recipe(
        "cuda",
        "g5",
        "nvidia.com/gpu",
        None,
        "docker.io/vllm/vllm-openai:v0.8.5",
        format="safetensors (Hugging Face layout)",
        precision="bf16",
        convert=f"{_PY} 'import torch, transformers as t; "
        'm = t.AutoModelForCausalLM.from_pretrained("/work/checkpoint", torch_dtype=torch.bfloat16); '
        'm.save_pretrained("/work/out", safe_serialization=True); '
        't.AutoTokenizer.from_pretrained("/work/checkpoint").save_pretrained("/work/out")\'',
        compiler_version=f"{_PY} 'import torch; print(\"cuda \" + str(torch.version.cuda))'",
        runtime_version=f"{_PY} 'import vllm; print(vllm.__version__)'",
        # The weights are loaded once in bf16 and written back as safetensors.
        cpu=2,
        memory_factor=1.25,
        memory_base_gib=4,
        disk_factor=2.0,
        disk_base_gib=10,
    ),
    "tensorrt": Recipe(
        "tensorrt",
        "g5",
        "nvidia.com/gpu",
        None,
        "nvcr.io/nvidia/tensorrt-llm/release:0.20.0",
        format="TensorRT-LLM engine (sm86, A10G only)",
        precision="bf16",
        convert="python3 /app/tensorrt_llm/examples/models/core/llama/convert_checkpoint.py "
        "--model_dir /work/checkpoint --output_dir /work/trt-ckpt --dtype bfloat16 --load_by_shard && "
        "trtllm-build --checkpoint_dir /work/trt-ckpt --output_dir /work/out --gemm_plugin auto",
        compiler_version=f"{_PY} 'import tensorrt_llm; print(tensorrt_llm.__version__)'",
        runtime_version=f"{_PY} 'import tensorrt; print(tensorrt.__version__)'",
        # --load_by_shard converts shard by shard; the build holds the converted weights once more.
        # Checkpoint, TensorRT-LLM checkpoint and engine are all on the work volume.
        cpu=2,
        memory_factor=1.5,
        memory_base_gib=4,
        disk_factor=3.0,
        disk_base_gib=10,
    ),
}
VARIANTS = tuple(RECIPES)
