# Runs the shared anchor ../shared/anchors/mnist_train.py unchanged and adds the
# process CPU time (time.process_time: all its threads) of each training epoch,
# for side-by-side runs with meshtrain that report CPU-seconds per example.
# The anchor brackets an epoch's training with time.perf_counter() (t0 = ...;
# dt = perf_counter() - t0); this wrapper records process_time() at every
# perf_counter() call (wall0, then per epoch: t0, end of training, wall), so
# the second and third calls of each epoch bracket its training. Nothing else
# changes: the anchor's own output is printed as it is.
# Usage: OPENBLAS_NUM_THREADS=1 MNIST_DIR=... /usr/bin/python3 mnist_train_cpu.py ../shared/anchors/mnist_train.py --model cnn --threads 1 --epochs 1
# prints, after the anchor's lines, TRAIN_CPU [seconds of epoch 1, ...].
import json, runpy, sys, time

real = time.perf_counter
marks = []


def perf_counter():
    marks.append(time.process_time())
    return real()


time.perf_counter = perf_counter
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name='__main__')
finally:
    epochs = (len(marks) - 1) // 3
    print('TRAIN_CPU ' + json.dumps([marks[2 + 3 * e] - marks[1 + 3 * e] for e in range(epochs)]), flush=True)
