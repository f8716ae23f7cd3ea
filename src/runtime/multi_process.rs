//! One rank per process (a job): how the processes of a job find each other and run a
//! collective together on shared simulated devices.
//!
//! * [`bootstrap`] — the job's root and members (`NEURON_RT_ROOT_COMM_ID`), remote arrivals.
//! * [`wire`] — the private protocol between the processes of a job.
//! * [`shm`] — named shared memory of a job.
//! * [`segment`] — a rank's device segment: its layout, header and the peers' view of it.
//! * [`go_board`] — where the ranks of a repeated collective meet in shared memory.
//! * [`run`] — one rank's part of a collective on the shared device segments.

pub mod bootstrap;
pub mod go_board;
pub mod host;
pub mod proxy;
pub mod run;
pub mod segment;
pub mod shadow;
pub mod shm;
pub mod wire;
