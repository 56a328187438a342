"""The shared facts every rule reads (torchlint/analysis): role, flow,
same-file helpers, the device in play per value, modules known by use, and
how often a statement runs. Each test states one fact on a small program."""

import textwrap

import libcst as cst

from torchlint.analysis import Analysis
from torchlint.analysis.place_kinds import CPU, DEVICE, UNKNOWN


def analyse(src: str, path: str = "train.py") -> Analysis:
    src = textwrap.dedent(src)
    return Analysis(cst.parse_module(src), path, src)


def call_at(a: Analysis, code: str):
    """The call whose source is exactly `code` (the first one)."""
    for c in a.facts.calls:
        if a.facts.module.code_for_node(c.node) == code:
            return c
    raise AssertionError(f"no call {code!r}")


# -- role ------------------------------------------------------------------------------


def test_test_files_and_functions_are_excluded():
    src = "import torch\ndef test_shapes():\n    y = model(torch.zeros(2))\n"
    a = analyse(src, "tests/test_model.py")
    assert a.roles.excluded(call_at(a, "model(torch.zeros(2))").site)
    b = analyse("import torch\nfor x, y in loader:\n    loss = model(x)\n    loss.backward()\n", "train.py")
    assert not b.roles.excluded(call_at(b, "model(x)").site)


def test_smoke_block_of_a_model_module_is_excluded():
    a = analyse(
        """
        import torch
        from torch import nn
        class Net(nn.Module):
            def forward(self, x):
                return x
        if __name__ == "__main__":
            net = Net()
            print(net(torch.randn(1, 3)).shape)
        """,
        "models/net.py",
    )
    assert a.roles.excluded(call_at(a, "net(torch.randn(1, 3))").site)


def test_training_loop_does_work():
    a = analyse(
        """
        for x, y in loader:
            loss = crit(model(x), y)
            loss.backward()
            opt.step()
        """
    )
    assert a.roles.does_work(call_at(a, "model(x)").site)


# -- flow --------------------------------------------------------------------------------


def test_model_place_follows_statement_order():
    a = analyse(
        """
        import torch
        from torch import nn
        device = torch.device("cuda")
        model = nn.Linear(2, 2)
        before = model(x)
        model.to(device)
        after = model(x)
        """
    )
    before, after = (
        call_at(a, "model(x)"),
        [c for c in a.facts.calls if a.facts.module.code_for_node(c.node) == "model(x)"][1],
    )
    assert a.places.model_place(before.node.func, before.site) == CPU
    assert a.places.model_place(after.node.func, after.site) == DEVICE


def test_move_on_one_branch_only_is_unknown():
    a = analyse(
        """
        import torch
        from torch import nn
        model = nn.Linear(2, 2)
        if args.word_vectors:
            model.to("cuda")
        out = model(x)
        """
    )
    c = call_at(a, "model(x)")
    assert a.places.model_place(c.node.func, c.site) == UNKNOWN


def test_another_functions_variable_of_the_same_name_does_not_count():
    # `train(model)` hands the module-level `model` on; the `model` parameter of
    # evaluate() is a different variable, moved at the top of its function.
    a = analyse(
        """
        import torch
        from torch import nn
        def evaluate(model, loader):
            model.to(device)
            for x, y in loader:
                out = model(x)
        if __name__ == "__main__":
            device = "cuda"
            model = nn.Linear(2, 2)
            train(model)
            evaluate(model=model, loader=loader)
        """
    )
    c = call_at(a, "model(x)")
    assert a.places.model_place(c.node.func, c.site) == DEVICE


# -- same-file helpers ----------------------------------------------------------------------


def test_helper_summary_moves_its_argument():
    a = analyse(
        """
        def to_device(batch, device):
            return batch.to(device)
        for batch in loader:
            batch = to_device(batch, "cuda")
        """
    )
    fn = a.helpers.function(call_at(a, 'to_device(batch, "cuda")'))
    assert fn is not None and "batch" in a.helpers.summary(fn).moves


def test_helper_summary_reads_under_a_test_of_the_arguments_type_every_call():
    # `if isinstance(val, torch.Tensor):` is the branch a call handed a tensor takes: a read
    # there runs every call; under a test of a setting it runs only on some calls
    a = analyse(
        """
        import torch
        def as_number(val):
            if isinstance(val, torch.Tensor):
                val = val.item()
            return val
        def logged(val, verbose):
            if verbose:
                print(val.item())
        def scalar(val):
            if val.dim() == 0:
                return val.item()
            return val
        def other(val):
            if not isinstance(val, torch.Tensor):
                return val.item()
            return val
        as_number(loss)
        logged(loss, True)
        scalar(loss)
        other(loss)
        """
    )
    read = a.helpers.summary(a.helpers.function(call_at(a, "as_number(loss)")))
    assert read.syncs == (("val", "`.item()`"),)
    # a setting, a test of the shape (which branch is taken is not known), the branch a tensor skips
    for call in ("logged(loss, True)", "scalar(loss)", "other(loss)"):
        assert a.helpers.summary(a.helpers.function(call_at(a, call))).syncs == (), call


def test_model_factories_are_not_forwards():
    # `load_model(...)` / `get_model(...)` build a model; `model(x)` runs one.
    a = analyse(
        """
        from mypkg import load_model
        def get_model(cfg):
            return Net(cfg)
        net = load_model(path)
        model = get_model(cfg)
        out = model(x)
        """
    )
    assert a.values.model_call(call_at(a, "load_model(path)")) is None
    assert a.values.model_call(call_at(a, "get_model(cfg)")) is None
    assert a.values.model_call(call_at(a, "model(x)")) is not None


def test_set_grad_enabled_false_guards_what_follows():
    a = analyse(
        """
        import torch
        def test(net, loader):
            net.eval()
            torch.set_grad_enabled(False)
            for x in loader:
                out = net(x)
        """
    )
    assert a.grad.guarded(call_at(a, "net(x)").site)


# -- device in play per value ----------------------------------------------------------------


def test_printing_cuda_availability_puts_nothing_on_a_device():
    a = analyse("import torch\nprint(torch.cuda.is_available())\nx = torch.zeros(3)\n")
    assert not a.places.accelerator_in_play()


def test_device_of_a_local_tensor_is_no_accelerator():
    # `device=w.device` follows another tensor: on its own it selects nothing.
    a = analyse(
        """
        import torch
        def entropy(cache):
            w = cache["weights"]
            pos = torch.arange(4, device=w.device)
            return pos
        """
    )
    assert not a.places.accelerator_in_play()
    b = analyse("import torch\nx = torch.arange(4, device=args.device)\n")
    assert b.places.accelerator_in_play()  # a configured device: `args.device`


def test_item_of_a_device_tensor_is_on_the_accelerator():
    a = analyse(
        """
        import torch
        x = torch.zeros(3, device="cuda")
        y = torch.zeros(3)
        a1 = x.sum().item()
        a2 = y.sum().item()
        """
    )
    assert a.places.tensor_place(call_at(a, "x.sum()").node, call_at(a, "x.sum()").site) == DEVICE
    assert a.places.tensor_place(call_at(a, "y.sum()").node, call_at(a, "y.sum()").site) == CPU


# -- modules known by use ----------------------------------------------------------------------


def test_an_imported_class_is_a_module_by_its_use():
    a = analyse(
        """
        from mypkg import Encoder
        enc = Encoder(8)
        enc.train()
        out = enc(x)
        """
    )
    forward = a.values.model_call(call_at(a, "enc(x)"))
    assert forward is not None and forward.known


# -- how often a statement runs -----------------------------------------------------------------


def test_periodic_exiting_and_bounded_branches_are_not_hot():
    a = analyse(
        """
        shown = 0
        for x, y in loader:
            loss = crit(model(x), y)
            loss.backward()
            a1 = loss.item()
            if step % 100 == 0:
                a2 = loss.item()
            if done:
                a3 = loss.item()
                break
            if shown < 3:
                shown += 1
                a4 = loss.item()
        """
    )
    items = [c for c in a.facts.calls if c.method == "item"]
    assert [a.loops.hot_context(c.site) is not None for c in items] == [True, False, False, False]


def test_a_branch_of_one_iteration_is_not_hot_but_a_first_epoch_is():
    # `if i == 0:` on the step loop's counter runs once per pass (a first-batch
    # visualisation); `if epoch == 0:` inside the step loop runs every step of
    # an epoch; a data value compared to 0 (`label == 0`) holds on many steps.
    a = analyse(
        """
        for epoch in range(3):
            for i, (x, label) in enumerate(tqdm(loader)):
                loss = crit(model(x), label)
                loss.backward()
                if i == 0:
                    a1 = loss.item()
                if i == len(loader) - 1 and epoch > 0:
                    a2 = loss.item()
                if epoch == 0:
                    a3 = loss.item()
                if label == 0:
                    a4 = loss.item()
                n = i
                if i == n:
                    a5 = loss.item()
        for step in tqdm(range(100)):
            loss = crit(model(x), y)
            loss.backward()
            if step == warmup:
                a6 = loss.item()
        """
    )
    items = [c for c in a.facts.calls if c.method == "item"]
    assert [a.loops.hot_context(c.site) is not None for c in items] == [False, False, True, True, True, False]


def test_only_a_count_from_zero_stops_a_loop_after_its_first_iteration():
    a = analyse(
        """
        for i in range(len(data)):
            if i == 1:
                break
            a1 = model(data[i])
        for i in range(1, len(data)):
            if i == 1:
                break
            a2 = model(data[i])
        """
    )
    loops = a.facts.loops
    assert [a.loops.runs_once(lp) for lp in loops] == [True, False]


# -- round-2 causes: device that follows a tensor, passes, decoding, handfuls, timing ----


def codes(src: str, path: str = "train.py"):
    from helpers import lint_source

    return [(f.code, f.row) for f in lint_source(textwrap.dedent(src), path)]


def test_device_of_a_forward_input_puts_nothing_on_an_accelerator():
    src = """
        import torch
        from torch import nn
        class Net(nn.Module):
            def forward(self, x):
                return x + torch.arange(x.shape[-1], device=x.device)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        total = 0
        for step in range(10):
            loss = model(torch.randn(4, 3)).sum()
            loss.backward()
            opt.step()
            total += loss.item()
        """
    assert not analyse(src).places.accelerator_in_play()
    assert ("TL401", 14) not in codes(src)
    # A config object's `.device` is a choice of device.
    chosen = "import torch\nx = torch.zeros(3, device=args.device)\n"
    assert analyse(chosen).places.accelerator_in_play()


def test_loop_calling_a_function_that_walks_data_runs_once_per_pass():
    src = """
        import torch
        device = torch.device("cuda")
        def evaluate(model, loader):
            model.eval()
            with torch.no_grad():
                for x, y in loader:
                    metric.update(model(x.to(device)), y.to(device))
            return metric.compute().item()
        for seed in seeds:
            score = evaluate(model, loader)
            print(seed, score)
        """
    a = analyse(src)
    loop = a.loops.loop_for(a.facts.module.body[3])
    assert a.loops.is_epoch_loop(loop)
    assert [c for c in codes(src) if c[0] == "TL401"] == []


def test_search_and_decoding_loops_need_their_values_on_the_host():
    beam = """
        import torch
        device = torch.device("cuda")
        for image, caps in loader:
            image = image.to(device)
            enc = encoder(image)
            seqs = torch.zeros(3, 1, device=device)
            while True:
                scores = decoder(enc, seqs)
                top, words = scores.view(-1).topk(3)
                done = [i for i, w in enumerate(words) if w == end]
                if done:
                    complete.extend(seqs[done].tolist())
                if len(done) == 3:
                    break
                seqs = torch.cat([seqs, words.unsqueeze(1)], 1)
        """
    assert [c for c in codes(beam) if c[0] == "TL401"] == []
    greedy = """
        import torch
        device = torch.device("cuda")
        @torch.no_grad()
        def generate(model, idx, n):
            for _ in range(n):
                logits = model(idx)
                nxt = logits[:, -1].argmax(-1, keepdim=True)
                print(nxt.item())
                idx = torch.cat([idx, nxt], 1)
            return idx
        """
    a = analyse(greedy)
    loop = a.loops.loop_for(a.facts.module.body[2].body.body[0])
    assert a.loops.decodes(loop)
    # Truncated BPTT carries the hidden state but trains: not decoding.
    bptt = """
        import torch
        device = torch.device("cuda")
        for i in range(0, data.size(0), 35):
            x, y = get_batch(data, i)
            out, hidden = model(x, hidden)
            loss = crit(out, y)
            loss.backward()
            total += loss.item()
        """
    assert ("TL401", 9) in codes(bptt)


def test_loops_over_a_handful_of_elements_are_not_element_work():
    few = "import torch\ngroups = torch.arange(3)\nfor g in torch.unique(groups):\n    print(g.item())\n"
    assert [c for c in codes(few) if c[0] == "TL402"] == []
    many = "import torch\ngroups = torch.arange(300, device='cuda')\nfor g in groups:\n    print(g.item())\n"
    assert ("TL402", 3) in codes(many)


def test_timing_comparison_scripts_are_tooling():
    src = """
        import datetime
        import torch
        v = torch.randn(100, 100, device="cuda")
        start = datetime.datetime.now()
        out = torch.zeros(100)
        for i in range(v.size(0)):
            out[i] = v[i].sum().item()
        print(datetime.datetime.now() - start)
        start = datetime.datetime.now()
        out2 = v.sum(1)
        print(datetime.datetime.now() - start)
        """
    assert [c for c in codes(src) if c[0] == "TL402"] == []
    # The same loop without the timing around it is reported.
    plain = src.replace("datetime.datetime.now()", "0")
    assert [c for c in codes(plain) if c[0] == "TL402"]


def test_a_training_main_that_prints_a_model_summary_is_no_tooling():
    # `summary(model, ...)` once before the epoch loop: the function still trains
    src = """
        import torch
        from torch.utils.data import DataLoader
        from torchsummary import summary
        def train_one_epoch(model, loader, opt):
            for x, y in loader:
                loss = model(x.cuda()).sum()
                loss.backward()
                opt.step()
        def main():
            model = torch.nn.Linear(4, 2).cuda()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            loader = DataLoader(ds, batch_size=32, num_workers=4, pin_memory=True)
            summary(model, (4,))
            for epoch in range(10):
                train_one_epoch(model, loader, opt)
        main()
        """
    assert ("TL304", 13) in codes(src)
    # a function that only summarises the model and runs it over the data is tooling
    only = src.replace(
        "                train_one_epoch(model, loader, opt)\n",
        "                for x, y in loader:\n                    model(x.cuda())\n",
    )
    assert [c for c in codes(only) if c[0] == "TL304"] == []


def test_an_amp_scalers_step_is_an_optimizer_step():
    # yolov7 train.py: `scaler.step(optimizer)` is the script's only optimizer step
    a = analyse(
        """
        scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            scaler.scale(criterion(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step(epoch)
        """
    )
    assert a.values.is_optimizer_step(call_at(a, "scaler.step(optimizer)"))
    assert not a.values.is_optimizer_step(call_at(a, "scheduler.step(epoch)"))
    assert not a.values.is_optimizer_step(call_at(a, "scaler.update()"))


def test_a_call_handed_a_loss_and_an_optimizer_steps():
    # mae engine_pretrain.py: `loss_scaler(loss, optimizer, ...)` runs backward and the step
    a = analyse(
        """
        from util.misc import NativeScaler
        loss_scaler = NativeScaler()
        for x, y in loader:
            loss = criterion(model(x), y)
            loss /= accum_iter
            loss_scaler(loss, optimizer, parameters=model.parameters())
            log(out, optimizer)
            out = model(x)
            loss_scaler(out, optimizer)
        """
    )
    assert a.values.is_train_call(call_at(a, "loss_scaler(loss, optimizer, parameters=model.parameters())"))
    # a model output is no loss, and neither is a name with no binding
    assert not a.values.is_train_call(call_at(a, "loss_scaler(out, optimizer)"))
    assert not a.values.is_train_call(call_at(a, "log(out, optimizer)"))
    # a criterion is no loss: `engine.train(model, loader, optimizer, loss_fn)` is not read as a step
    c = analyse(
        """
        import torch
        from going_modular import engine
        loss_fn = torch.nn.CrossEntropyLoss()
        focal = FocalLoss(gamma=2)
        engine.train(model, loader, optimizer, loss_fn)
        engine.train(model, loader, optimizer, focal)
        """
    )
    assert not c.values.is_train_call(call_at(c, "engine.train(model, loader, optimizer, loss_fn)"))
    assert not c.values.is_train_call(call_at(c, "engine.train(model, loader, optimizer, focal)"))
    # a same-file function is read instead of guessed
    b = analyse(
        """
        def report(loss, optimizer):
            print(loss, optimizer)
        for x, y in loader:
            loss = criterion(model(x), y)
            report(loss, optimizer)
        """
    )
    assert not b.values.is_train_call(call_at(b, "report(loss, optimizer)"))


def test_validation_before_training_in_the_same_epoch_loop_is_not_a_demo():
    src = """
        import torch
        from torch import nn
        device = torch.device("cuda")
        model = nn.Linear(4, 2).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(3):
            model.eval()
            for x, y in val:
                correct = (model(x.to(device)).argmax(1) == y.to(device)).sum()
            model.train()
            for x, y in train:
                loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
                opt.zero_grad()
                loss.backward()
                opt.step()
        """
    assert ("TL201", 10) in codes(src)
    # A forward before a training loop it does not share stays a demo of an untrained model.
    demo = """
        import torch
        from torch import nn
        device = torch.device("cuda")
        model = nn.Linear(4, 2).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model.eval()
        for x, y in val:
            correct = (model(x.to(device)).argmax(1) == y.to(device)).sum()
        model.train()
        for x, y in train:
            loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    found = codes(demo)
    assert not [c for c in found if c[0] in ("TL000", "TL201")]


def test_dataset_resolved_through_a_parameter_and_a_returned_tuple():
    src = """
        import torch
        from torch.utils.data import DataLoader
        from datautils import MyTrainDataset
        def load_train_objs():
            train_set = MyTrainDataset(2048)
            model = torch.nn.Linear(20, 1)
            return train_set, model
        def prepare_dataloader(dataset, batch_size):
            return DataLoader(dataset, batch_size=batch_size, pin_memory=True, shuffle=True)
        def main(device):
            dataset, model = load_train_objs()
            loader = prepare_dataloader(dataset, 32)
            model = model.to(device)
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
        if __name__ == "__main__":
            main(torch.device("cuda"))
        """
    # A foreign dataset built from a size only: it may only index memory.
    assert [c for c in codes(src) if c[0] == "TL302"] == []
    # The same path to a dataset that reads files is reported.
    images = src.replace("MyTrainDataset(2048)", "ImageFolderDataset(root=args.data)")
    assert ("TL302", 10) in codes(images)


# -- consumers: who reads a moved value, and where ------------------------------------------------

_GPU = "import torch\nfrom torch import nn\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"


def _move_readers_on(src: str, move: str) -> bool:
    """`Analysis.consumers.all_on` for the move statement `move` (a call's code)."""
    a = analyse(src)
    call = call_at(a, move)
    target = a.places.move_device(call)
    return a.consumers.all_on(call.receiver.value, call.site, target)


def test_every_later_reader_of_a_moved_name_must_work_on_its_new_device():
    on_device = (
        _GPU
        + "model = nn.Linear(3, 1).to(device)\nx = torch.randn(2, 3)\nx.to(device)\nprint(model(x * 2).sum().item())\n"
    )
    assert _move_readers_on(on_device, "x.to(device)")
    # A model built on the CPU and never moved: after `x = x.cuda()` it would get a device tensor.
    cpu_model = (
        _GPU + "D = nn.Linear(3, 1)\nx = torch.randn(2, 3)\nif torch.cuda.is_available():\n    x.cuda()\ny = D(x)\n"
    )
    assert not _move_readers_on(cpu_model, "x.cuda()")
    # A tensor the value meets in a comparison stays on the device: `y.cpu()` may not rebind y.
    compared = _GPU + "t = torch.randn(3).to(device)\ny = torch.randn(3).to(device)\ny.cpu()\nok = (y == t).all()\n"
    assert not _move_readers_on(compared, "y.cpu()")
    assert _move_readers_on(compared.replace("ok = (y == t).all()", "print(y.numpy())"), "y.cpu()")
    # Host-only code, and code we cannot see, are not readers of a device tensor.
    assert not _move_readers_on(_GPU + "x = torch.randn(3)\nx.cuda()\nprint(x.numpy())\n", "x.cuda()")
    assert not _move_readers_on(_GPU + "x = torch.randn(3)\nx.cuda()\nsave_somewhere(x)\n", "x.cuda()")


def test_readers_follow_loops_rebindings_and_helpers():
    # Read earlier in the loop: the next iteration sees the moved value.
    loop = _GPU + "D = nn.Linear(3, 1)\nx = torch.randn(2, 3)\nfor i in range(3):\n    y = D(x)\n    x.to(device)\n"
    assert not _move_readers_on(loop, "x.to(device)")
    # Rebound before the reader: the reader sees another value.
    rebound = _GPU + "D = nn.Linear(3, 1)\nx = torch.randn(2, 3)\nx.to(device)\nx = torch.randn(2, 3)\ny = D(x)\n"
    assert _move_readers_on(rebound, "x.to(device)")
    # A same-file helper is read: its parameter's readers are the value's readers.
    helper = (
        _GPU
        + "model = nn.Linear(3, 1).to(device)\ndef run(a):\n    return model(a)\nx = torch.randn(2, 3)\nx.to(device)\nrun(x)\n"
    )
    assert _move_readers_on(helper, "x.to(device)")
    cpu_helper = helper.replace(".to(device)\ndef", "\ndef")
    assert not _move_readers_on(cpu_helper, "x.to(device)")


# -- where a TensorDataset's tensors live ------------------------------------------------------------


def _dataset_tensors(src: str):
    a = analyse(src)
    ds = call_at(
        a,
        next(
            c for c in (a.facts.module.code_for_node(c.node) for c in a.facts.calls) if c.startswith("TensorDataset(")
        ),
    )
    return [a.loaders.data_place(arg.value, ds.site) for arg in ds.node.args], a


def test_a_tensor_datasets_tensors_are_followed_to_where_they_live():
    head = _GPU + "from torch.utils.data import DataLoader, TensorDataset\nx = torch.randn(4, 3)\n"
    places, a = _dataset_tensors(head + "x = x.to(device)\nds = TensorDataset(torch.stack([x] * 8))\n")
    assert places == [DEVICE]
    places, _ = _dataset_tensors(head + "ds = TensorDataset(torch.stack([x] * 8), torch.cat([x, x]).float()[:4])\n")
    assert places == [CPU, CPU]
    places, _ = _dataset_tensors(head + "y = torch.load('y.pt')\nds = TensorDataset(x, y)\n")
    assert places == [CPU, None]  # loaded from a file: could be a device tensor
    # A dataset with a part on the device places its items (no pinning, no workers): TL302/TL303 stay silent.
    src = head + "x = x.to(device)\nds = TensorDataset(torch.stack([x] * 8))\nloader = DataLoader(ds)\n"
    src += "for (b,) in loader:\n    model(b.to(device)).sum().backward()\n"
    a = analyse(src)
    (loader,) = list(a.loaders.calls())
    assert a.loaders.info(loader).dataset.value == "places"
    # Not known to be on the host: reported by TL303, without a fix.
    unknown = src.replace("x = x.to(device)\n", "x = torch.load('x.pt')\n")
    a = analyse(unknown)
    (loader,) = list(a.loaders.calls())
    assert not a.loaders.info(loader).host_items


# -- `self.x` is read from its own class family -----------------------------------------


def test_self_attribute_reads_its_own_classes_bindings():
    """`self.head` read in one class sees that class's (and its same-file bases')
    bindings, not another class's `self.head`."""
    a = analyse(
        """
        import torch
        from torch import nn
        class Scale(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = torch.zeros(3)
            def forward(self, x):
                return x * self.head
        class Base(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(3, 3)
        class Net(Base):
            def forward(self, x):
                return self.head(x)
        def helper(self, x):
            return self.head(x)
        """,
        "models.py",
    )
    net_read = call_at(a, "self.head(x)")
    assert a.values.model_call(net_read) is not None  # Net's `self.head` is Base's layer
    assert [b.site.scope.name for b in a.values.bindings_for("self.head", net_read.site)] == ["__init__"]
    assert len(a.values.bindings_for("self.head", net_read.site)) == 1
    outside = [c for c in a.facts.calls if a.facts.module.code_for_node(c.node) == "self.head(x)"][-1]
    assert len(a.values.bindings_for("self.head", outside.site)) == 2  # outside every class: any class's


def test_callers_and_methods_are_found_through_indexes():
    a = analyse(
        """
        class Trainer:
            def step(self, x):
                return x
            def run(self, xs):
                for x in xs:
                    self.step(x)
        class Other:
            def step(self, x):
                return x
        def step(x):
            return x
        step(1)
        """,
    )
    trainer_step, other_step, free_step = [fn for fn in a.facts.functions if fn.name == "step"]
    assert [a.facts.module.code_for_node(c.node) for c in a.values.callers(trainer_step)] == ["self.step(x)"]
    assert a.values.callers(other_step) == []
    assert [a.facts.module.code_for_node(c.node) for c in a.values.callers(free_step)] == ["step(1)"]
