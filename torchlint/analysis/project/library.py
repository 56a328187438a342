"""What the project pass knows of libraries: the roots that give a project
class its kind, the library loaders that take DataLoader's arguments, and
what a library call evidently returns. Names are the qualified names the
facts give (`torch.nn.Module`, `torch_geometric.loader.DataLoader`)."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from torchlint.analysis.knowledge import PYG_LOADERS
from torchlint.analysis.project.kinds import ClassKind, ValueKind
from torchlint.analysis.vocabulary import (
    DATALOADER,
    DATASET_BASES,
    ITERABLE_DATASET_BASES,
    NN_NON_MODULES,
    NON_MODEL_PRETRAINED,
    TENSOR_DATASET,
)

_LIGHTNING = ("lightning", "lightning.pytorch", "pytorch_lightning")


def _lightning(cls: str, modules: Tuple[str, ...]) -> Dict[str, ClassKind]:
    kind = ClassKind.LIGHTNING_MODULE if cls == "LightningModule" else ClassKind.LIGHTNING_DATAMODULE
    names = [f"{root}.{cls}" for root in _LIGHTNING]
    names += [f"{root}.core.{cls}" for root in _LIGHTNING[1:]]
    names += [f"{root}.core.{m}.{cls}" for root in _LIGHTNING[1:] for m in modules]
    return {n: kind for n in names}


CLASS_KINDS: Dict[str, ClassKind] = {
    **{n: ClassKind.DATASET for n in DATASET_BASES | TENSOR_DATASET},
    **{n: ClassKind.ITERABLE_DATASET for n in ITERABLE_DATASET_BASES},
    **{n: ClassKind.LOADER for n in DATALOADER | PYG_LOADERS},
    **_lightning("LightningModule", ("module", "lightning")),
    **_lightning("LightningDataModule", ("datamodule",)),
}


def class_kind(name: str) -> Optional[ClassKind]:
    """The kind of a library class (None: not one we know)."""
    found = CLASS_KINDS.get(name)
    if found is not None:
        return found
    last = name.rsplit(".", 1)[-1]
    if name.startswith("torch.nn.") and not name.startswith(NN_NON_MODULES) and last[:1].isupper():
        return ClassKind.MODULE  # nn.Module and its layers (values.is_nn_layer)
    if name.startswith("torchvision.datasets.") and last[:1].isupper():
        return ClassKind.DATASET
    return None


def builds_loader(name: str) -> bool:
    """A library class whose calls take torch DataLoader's arguments."""
    return name in DATALOADER or name in PYG_LOADERS


def call_kind(name: str) -> Optional[ValueKind]:
    """What a call of library callable `name` evidently returns."""
    kind = class_kind(name)
    if kind is not None:
        if kind is ClassKind.MODULE and name.endswith("Loss"):
            return None  # a loss function object, not a model
        return ValueKind.of_class(kind)
    last = name.rsplit(".", 1)[-1]
    if name.startswith("torchvision.models.") and last[:1].islower():
        return ValueKind.MODULE
    if name == "timm.create_model":
        return ValueKind.MODULE
    if last == "from_pretrained" and "." in name and not NON_MODEL_PRETRAINED.search(name.rsplit(".", 1)[0]):
        return ValueKind.MODULE
    return None
