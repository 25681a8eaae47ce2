//! The discrete-event simulator.
