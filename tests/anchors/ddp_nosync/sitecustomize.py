# With this directory on PYTHONPATH, every Python process (the DDP ranks
# that torch.multiprocessing spawns included) builds DistributedDataParallel
# with require_backward_grad_sync False, as inside DDP's own no_sync(): the
# backward pass then all-reduces nothing, and everything else (the processes,
# the data sharding, the epoch's barriers, the CPU they share) stays as in
# ../shared/anchors/mnist_train.py --ddp N, which runs unchanged. The step
# time of that run is DDP's step without its gradient exchange, the baseline
# for what the exchange costs (BENCHMARKS.md, "What the exchange costs a step").
# Usage: PYTHONPATH=tests/anchors/ddp_nosync GLOO_SOCKET_IFNAME=lo OPENBLAS_NUM_THREADS=1 \
#        /usr/bin/python3 ../shared/anchors/mnist_train.py --model cnn --ddp N --threads 1 --epochs 1
import sys

try:
    import torch.nn.parallel as _parallel

    _DDP = _parallel.DistributedDataParallel

    class _NoSyncDDP(_DDP):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.require_backward_grad_sync = False

    _parallel.DistributedDataParallel = _NoSyncDDP
    print('ddp_nosync: DistributedDataParallel without gradient all-reduce', file=sys.stderr, flush=True)
except ImportError:
    pass
