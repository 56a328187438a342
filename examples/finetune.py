"""Fine-tune the classifier on several GPUs, with a running loss report.

A fine-tuning script written the way such scripts grow; `torchlint --preview
examples/finetune.py` reports:
  TL601  `nn.DataParallel` where DistributedDataParallel is several times faster
  TL104  the class weights are built on the CPU, then moved
  TL106  ... and copied to the device again every step
  TL404  `torch.compile` wraps the model again every step
  TL202  `running` keeps every step's autograd graph alive until the report
  TL403  `torch.cuda.empty_cache()` every step
  TL304  the loader's two workers are shut down and started again every epoch
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    model = nn.DataParallel(model).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    class_weights = torch.linspace(0.5, 1.5, 10)
    dataset = TensorDataset(torch.randn(4096, 64), torch.randint(0, 10, (4096,)))
    loader = DataLoader(dataset, batch_size=256, shuffle=True, num_workers=2, pin_memory=True)

    running = 0.0
    for epoch in range(3):
        for inputs, targets in loader:
            inputs = inputs.to(device, non_blocking=True)
            targets = targets.to(device, non_blocking=True)
            weights = class_weights.to(device)
            compiled = torch.compile(model)
            loss = nn.functional.cross_entropy(compiled(inputs), targets, weight=weights)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss
            torch.cuda.empty_cache()
        print(f"epoch {epoch}: mean loss {running / len(loader):.4f}")
        running = 0.0


if __name__ == "__main__":
    main()
