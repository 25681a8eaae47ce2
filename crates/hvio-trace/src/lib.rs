//! Trace and workload readers and writers.
