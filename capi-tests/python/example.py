import os, struct, sys, threading  # all-reduce (add) of 4 floats on 2 ranks, one thread per core
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); os.environ["NEURON_RT_VISIBLE_CORES"] = "0-1"
from opennrt_ctypes import CcOpType as C, Comm, Dtype as D, Nrt, OpType as O
nrt = Nrt(); nrt.init(); out = {}
def rank(i):  # rank i = logical core i = global device id i
    nrt.cc_global_comm_init(i, i, 2); t = nrt.tensor_allocate(i, 16, f"rank{i}")
    t.write(struct.pack("<4f", *[i + 1.0] * 4))  # rank 0 sends 1.0s, rank 1 sends 2.0s
    ctx = nrt.cc_prepare(Comm([0, 1], i, i, 2, i), [t], [t], D.NRT_DTYPE_FLOAT32, O.NRT_OP_ADD, C.NRT_CC_ALLREDUCE)
    nrt.cc_schedule(ctx, queue=0).wait_poll(); out[i] = struct.unpack("<4f", t.read()); t.free()
threads = [threading.Thread(target=rank, args=(i,)) for i in range(2)]
[t.start() for t in threads]; [t.join() for t in threads]; nrt.close()
print("all-reduce result per rank:", out)
sys.exit(0 if out == {0: (3.0,) * 4, 1: (3.0,) * 4} else 1)
