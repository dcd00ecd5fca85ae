//! Only run.rs and main.rs read the environment.

use std::env;

pub fn read() {
    let _ = env::var("X"); // fires
    let _ = std::env::var_os("X"); // fires
    let _ = std::env::vars().count(); // fires
}
