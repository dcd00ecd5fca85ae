//! Only net (src/net.rs) builds HTTP clients and TLS configs.

use reqwest::Client; // fires

pub fn build() {
    let _ = Client::new(); // fires
    let _ = reqwest::Client::builder(); // fires
    let _ = reqwest::Client::default(); // fires
    let _: Client = Default::default(); // fires
    let _ = reqwest::ClientBuilder::new(); // fires
    let _ = rustls::ClientConfig::builder(); // fires
    let _ = reqwest::Certificate::from_pem(b""); // fires
    let _ = reqwest::NoProxy::from_string(""); // fires
    let _ = hyper_util::client::proxy::matcher::Matcher::from_env(); // fires
    let _ = hyper_util::client::proxy::matcher::Matcher::builder(); // fires
}
