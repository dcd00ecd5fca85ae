//! `GET /v1/instance_types` (`InstanceTypesV1`) and
//! `GET /v1/instance_type_prices` (`InstanceTypePricesV1`, price in USD per
//! minute), both from the scenario's `instance_types`. A type whose `price`
//! is absent is missing from the price list; `price` is served as given (a
//! hostile price — negative, or a string the schema check then flags) and
//! under `price_name` when set (a price that names another type).

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::Answer;
use crate::state::Platform;

pub(super) fn instance_types(p: &Platform) -> Answer {
    let types: Vec<Value> = p
        .scenario
        .instance_types
        .iter()
        .map(|t| t.v1(&t.name))
        .collect();
    (StatusCode::OK, json!({"instance_types": types}))
}

pub(super) fn instance_type_prices(p: &Platform) -> Answer {
    let priced: Vec<Value> = p
        .scenario
        .instance_types
        .iter()
        .filter_map(|t| {
            let price = t.price.clone()?;
            let name = t.price_name.as_deref().unwrap_or(&t.name);
            Some(json!({"instance_type": t.v1(name), "price": price}))
        })
        .collect();
    (StatusCode::OK, json!({"instance_types": priced}))
}
