//! PyO3 glue.
