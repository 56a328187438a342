"""Evaluate a trained checkpoint of the example classifier on the validation
set and report loss, accuracy and the most confident predictions."""
import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision.models import resnet18

from data import FolderImages, default_device


def load_model(path: str, device: torch.device) -> nn.Module:
    model = resnet18(num_classes=10)
    model.load_state_dict(torch.load(path, map_location="cpu"))
    return model.to(device)


def evaluate(model, loader, device):
    model.eval()
    criterion = nn.CrossEntropyLoss()
    total_loss = 0.0
    correct = 0
    confident = []
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        logits = model(images)
        total_loss += criterion(logits, labels).item()
        correct += (logits.argmax(dim=1) == labels).sum()
        # Per-sample post-processing, one row at a time.
        for i in range(logits.shape[0]):
            probs = torch.softmax(logits[i], dim=0)
            confident.append(probs.max().cpu())
    accuracy = float(correct) / len(loader.dataset)
    return total_loss / len(loader), accuracy, torch.stack(confident)


def main():
    device = default_device()
    model = load_model("checkpoint.pt", device)
    loader = DataLoader(FolderImages("data/val", train=False), batch_size=256, num_workers=4, pin_memory=True)
    loss, accuracy, confidence = evaluate(model, loader, device)
    print(f"val loss {loss:.4f}  accuracy {accuracy:.2%}  mean confidence {confidence.mean():.3f}")


if __name__ == "__main__":
    main()
