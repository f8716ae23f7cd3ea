import os, struct, sys, threading  # all-reduce (add) of 4 floats on 2 ranks, one thread per core
os.environ["NEURON_RT_VISIBLE_CORES"] = "0-1"  # read by nrt_init: this process owns cores 0-1
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opennrt_ctypes import CcOpType, Comm, Dtype, Nrt, OpType
nrt = Nrt(); nrt.init(); out = {}
def rank(i):  # rank i runs on logical core i and is global device i of 2
    nrt.cc_global_comm_init(i, i, 2); t = nrt.tensor_allocate(i, 16)
    t.write(struct.pack("<4f", *[i + 1.0] * 4))  # rank 0 contributes 1.0s, rank 1 2.0s
    comm = Comm([0, 1], rank=i, ctx_device_id=i, ctx_device_count=2, vnc=i)
    ctx = nrt.cc_prepare(comm, [t], [t], Dtype.NRT_DTYPE_FLOAT32, OpType.NRT_OP_ADD, CcOpType.NRT_CC_ALLREDUCE)
    nrt.cc_schedule(ctx, queue=0).wait_poll(); out[i] = struct.unpack("<4f", t.read()); t.free()
threads = [threading.Thread(target=rank, args=(i,)) for i in range(2)]
[t.start() for t in threads]; [t.join() for t in threads]; nrt.close()
print("all-reduce result per rank:", [out.get(i) for i in range(2)])
sys.exit(0 if out == {0: (3.0,) * 4, 1: (3.0,) * 4} else 1)
