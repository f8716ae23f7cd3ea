//! The calls that run a loaded model for a user (docs/contract/abi.md §3.4, §3.6): `nrt_execute`
//! and `nrt_execute_repeat` ([`Model::execute_repeat`]) and `nrta_execute_schedule`
//! ([`schedule`], the same run queued on the core's compute execution unit). The ABI entry
//! resolves the handles and makes one of these calls.
//!
//! Both count one output completion on every output tensor once the runs succeeded (the
//! counter behind `nrt_tensor_check_output_completion`, `runtime::tensor`).

use std::sync::Arc;

use super::Model;
use crate::error::Result;
use crate::runtime::tensor::Tensor;
use crate::runtime::xu::{self, ExecRet, XuType};

impl Model {
    /// Run the model `times` times with the same binding ([`Model::execute`]), then complete
    /// every output tensor once. The first failing run stops the loop and completes nothing.
    pub fn execute_repeat(
        &self,
        inputs: &[(String, Tensor)],
        outputs: &[(String, Tensor)],
        times: u32,
    ) -> Result<()> {
        for _ in 0..times {
            self.execute(inputs, outputs)?;
        }
        for (_, t) in outputs {
            t.complete_output();
        }
        Ok(())
    }
}

/// `nrta_execute_schedule`: queue one execution of `model` (with the sets' members as they are
/// now) on the compute execution unit `queue` of its core; returns the request's sequence id.
/// The run is [`Model::execute_repeat`] once, on the XU's worker in FIFO order; a failure is
/// logged, and its status lands in `exec_ret` as `nrt_execute` would return it. The model is
/// shared with the request, so an unload while it is queued frees it only after it ran.
pub fn schedule(
    model: Arc<Model>,
    inputs: Vec<(String, Tensor)>,
    outputs: Vec<(String, Tensor)>,
    queue: u32,
    exec_ret: ExecRet,
) -> Result<u64> {
    let lnc = model.vnc();
    let job = Box::new(move || {
        model
            .execute_repeat(&inputs, &outputs, 1)
            .inspect_err(|e| crate::log_error!("nrta_execute_schedule", "{e}"))
    });
    xu::submit(lnc, XuType::Compute, queue, exec_ret, job)
}
