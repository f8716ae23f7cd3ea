pub use opennrt;
