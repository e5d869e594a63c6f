//! stepsched-pool
#![cfg_attr(not(test), warn(missing_docs))]
