# Gloo all-reduce (float32 SUM) time, busbw and CPU per operation, for side-by-side
# runs with `meshtrain bench allreduce` (whose cpu(us) column is the CPU time of all
# peers per all-reduce). Same method as ../shared/anchors/allreduce_gloo.py (spawned
# processes, one thread each, rendezvous on 127.0.0.1, k ops per rep, median of reps),
# plus each process's CPU time (time.process_time: all its threads) over the timed
# reps, summed over the ranks.
# Usage: GLOO_SOCKET_IFNAME=lo OPENBLAS_NUM_THREADS=1 /usr/bin/python3 allreduce_gloo_cpu.py --n 2 --sizes 16M,64M
import argparse, os, statistics, time

def parse_size(s):
    m = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}
    return int(s[:-1]) * m[s[-1]] if s[-1] in m else int(s)

def worker(rank, n, port, sizes, reps):
    os.environ.setdefault('GLOO_SOCKET_IFNAME', 'lo')
    import torch, torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank, world_size=n)
    for sz in sizes:
        x = torch.ones(sz // 4, dtype=torch.float32)
        dist.barrier()
        t0 = time.perf_counter(); dist.all_reduce(x); dist.all_reduce(x); tw = (time.perf_counter() - t0) / 2
        kt = torch.tensor([max(3, min(500, int(0.4 / max(tw, 1e-6))))])
        dist.broadcast(kt, 0); k = int(kt.item())
        ts, cpu = [], 0.0
        for _ in range(reps):
            dist.barrier()
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(k):
                dist.all_reduce(x)
            ts.append((time.perf_counter() - t0) / k)
            cpu += time.process_time() - c0
        c = torch.tensor([cpu / (k * reps)], dtype=torch.float64)
        dist.all_reduce(c)  # CPU of all ranks per op
        if rank == 0:
            med = statistics.median(ts)
            busbw = sz * 2 * (n - 1) / n / med
            print(f"gloo N={n} size={sz} k={k} median_us={med*1e6:.1f} busbw_GBps={busbw/1e9:.3f} cpu_us={c.item()*1e6:.0f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--n', type=int, default=2)
    ap.add_argument('--sizes', default='16M,64M')
    ap.add_argument('--reps', type=int, default=5)
    ap.add_argument('--port', type=int, default=29531)
    a = ap.parse_args()
    import torch.multiprocessing as mp
    mp.spawn(worker, args=(a.n, a.port, [parse_size(s) for s in a.sizes.split(',')], a.reps), nprocs=a.n, join=True)
