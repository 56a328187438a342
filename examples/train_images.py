"""Train the classifier on an image folder (`data/train/<class>/*.jpg`) with
the loaders of data.py and the GPU-side augmentation of augment.py."""
import torch
import torch.nn.functional as F
from torchvision.models import resnet18

from augment import augment
from data import build_loaders, default_device, on_device, parse_args


def main():
    args = parse_args()
    device = default_device()
    model = resnet18(num_classes=10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    train_loader, _ = build_loaders("data", args.batch_size)
    for epoch in range(args.epochs):
        model.train()
        for images, labels in on_device(train_loader, device):
            images, targets = augment(images, labels, num_classes=10)
            log_probs = F.log_softmax(model(images), dim=1)
            loss = -(targets * log_probs).sum(dim=1).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    torch.save(model.state_dict(), args.checkpoint)


if __name__ == "__main__":
    main()
