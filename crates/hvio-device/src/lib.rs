//! Device models for the simulator and the daemon's emulator backend.
