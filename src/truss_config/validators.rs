//! truss's hand-written validators and serializers, ported one by one.
//!
//! The schema says which ones the pinned truss declares; a unit test fails
//! when it names one missing from `PORTED`, so a truss bump cannot silently
//! skip a new check.

use super::formats::*;
use super::yaml11::Node;
use super::{Path, Schema, at, py, trt_llm};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// Every truss validator, serializer and computed field handled here (the
/// unknown-key refusal is in `Schema::model`).
#[cfg(test)]
pub(super) const PORTED: &[&str] = &[
    "AcceleratorSpec._parse_combined_spec",
    "AcceleratorSpec._to_string_spec",
    "BDNAccess._validate_namespace",
    "CheckpointRepository.__init__",
    "BDNAccess._validate_unique_grants",
    "BDNConfig._validate_unique_access_namespaces",
    "BDNConfig._validate_unique_mount_paths",
    "BDNVolumeMount._validate_filter_paths",
    "BDNVolumeMount._validate_path",
    "BDNVolumeMount._validate_source",
    "BaseImage._validate_path",
    "Build._validate_secrets",
    "CheckpointList._no_mixing",
    "ConfigModel._maybe_forbid_extra",
    "DockerAuthSettings._normalize_auth_method",
    "DockerAuthSettings.validate_auth_fields",
    "DockerServer._validate_run_as_user_id",
    "DockerServer._validate_start_command",
    "EgressRestrictions._validate_fqdn_allow_list",
    "EgressRestrictions._validate_ip_allow_list",
    "FabricRequirement._serialize",
    "ModelRepo._check_v2_requirements",
    "ModelRepo._validate_revision",
    "Resources._serialize",
    "Resources._validate_cpu",
    "Resources._validate_memory",
    "Resources.strip_use_gpu",
    "Resources.use_gpu",
    "Runtime._check_legacy_workers",
    "Runtime._default_transport_kind",
    "Runtime._handle_legacy_input",
    "Runtime._serialize_transport",
    "Runtime._validate_semver",
    "Runtime.sync_is_websocket",
    "TRTLLMConfigurationV1.model_post_init",
    "TRTLLMConfigurationV2.validate_inference_stack_v2",
    // It only logs a preview warning.
    "TRTLLMRuntimeConfigurationV2.validate_patch_kwargs",
    "TrussConfig._default_cache_internal_if_none",
    // It dumps the section whole, which is what `Schema::ser` does.
    "TrussConfig._serialize_trt_llm",
    "TrussConfig._validate_config",
    "TrussConfig._validate_python_version",
    "TrussConfig._validate_remote_ssh",
    "TrussConfig._validate_trt_llm_resources",
    "TrussSpeculatorConfiguration.__init__",
    "TrussTRTLLMBuildConfiguration.__init__",
    "TrussTRTLLMBuildConfiguration.model_post_init",
    "TrussTRTLLMBuildConfiguration.reject_runtime_lora_cache_fields",
    "TrussTRTLLMBuildConfiguration.validate_moe_parallelism_valid",
    "TrussTRTLLMRuntimeConfiguration.validate_lora_cache_adapter_sizes",
    "TrussTRTQuantizationConfiguration.__init__",
    "VersionsOverrides.version_must_start_with_number",
    "Weights._validate_unique_mount_locations",
    "WeightsAuth._normalize_auth_method",
    "WeightsAuth._validate_auth_fields",
    "WeightsSource._validate_auth_secret_name",
    "WeightsSource._validate_mount_location",
    "WeightsSource._validate_source",
    "get_discriminator_value",
];

/// The union member a named discriminator function picks for this input.
pub(super) fn discriminate(function: &str, n: &Node) -> Result<String, String> {
    match function {
        "get_discriminator_value" => trt_llm::discriminate(n),
        other => Err(format!("discriminator {other} is not ported")),
    }
}

/// The union member a validated value came from.
pub(super) fn variant_of(m: &Map<String, Value>) -> Option<&str> {
    trt_llm::variant_of(m)
}

const ACCELERATORS_MODEL: &str = "AcceleratorSpec";

/// Whether a model's unknown keys reach its dump. truss refuses unknown keys
/// by validating the dump again, so keys a serializer drops (an accelerator
/// written as a mapping becomes `"H100:8"`) pass.
pub(super) fn extras_reach_dump(name: &str) -> bool {
    name != ACCELERATORS_MODEL
}

/// `mode="before"` model validators: they see the raw input.
pub(super) fn before_model<'a>(
    schema: &Schema,
    name: &str,
    input: &'a Node,
    path: &Path,
) -> Result<Cow<'a, Node>, String> {
    match name {
        ACCELERATORS_MODEL => accelerator_spec(schema, input, path).map(Cow::Owned),
        "TrussTRTLLMBuildConfiguration" | "VersionsOverrides" => {
            trt_llm::before_model(name, input, path)?;
            Ok(Cow::Borrowed(input))
        }
        "Resources" => match input {
            Node::Map(m) => Ok(Cow::Owned(Node::Map(
                m.iter()
                    .filter(|(k, _)| *k != Node::Str("use_gpu".into()))
                    .cloned()
                    .collect(),
            ))),
            _ => Ok(Cow::Borrowed(input)),
        },
        "Runtime" => {
            let Node::Map(m) = input else {
                return Ok(Cow::Borrowed(input));
            };
            if let Some(w) = input.get("num_workers") {
                let one = matches!(w, Node::Int(1) | Node::Bool(true))
                    || matches!(w, Node::Float(f) if *f == 1.0);
                if !one {
                    return Err(at(
                        path,
                        "num_workers: after truss 0.9.49 only 1 worker per server is allowed; use predict_concurrency and autoscaling instead",
                    ));
                }
            }
            let no_transport = matches!(input.get("transport"), None | Some(Node::Null));
            if no_transport && input.get("is_websocket_endpoint").is_some_and(Node::truthy) {
                let mut m = m.clone();
                m.retain(|(k, _)| *k != Node::Str("transport".into()));
                m.push((
                    Node::Str("transport".into()),
                    Node::Map(vec![(
                        Node::Str("kind".into()),
                        Node::Str("websocket".into()),
                    )]),
                ));
                return Ok(Cow::Owned(Node::Map(m)));
            }
            Ok(Cow::Borrowed(input))
        }
        "ModelRepo" | "ModelRepoCacheInternal" => {
            model_repo_v2(input, path)?;
            Ok(Cow::Borrowed(input))
        }
        _ => Ok(Cow::Borrowed(input)),
    }
}

/// `AcceleratorSpec` accepts `"A100"`, `"H100:8"`, a mapping or null.
fn accelerator_spec(schema: &Schema, input: &Node, path: &Path) -> Result<Node, String> {
    let known = || match &schema.def(ACCELERATORS_MODEL).fields[0].ty {
        super::Ty::Nullable { of } => match &**of {
            super::Ty::Enum { values } => values.clone(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    match input {
        Node::Null => Ok(Node::Map(Vec::new())),
        Node::Map(_) => Ok(input.clone()),
        Node::Str(s) => {
            let parts: Vec<&str> = s.trim().split(':').collect();
            if parts[0].is_empty() {
                return Err(at(path, "accelerator type cannot be empty"));
            }
            let values = known();
            if !values.iter().any(|v| v == parts[0]) {
                return Err(at(
                    path,
                    format!(
                        "unsupported accelerator type `{}`; available types: {}",
                        parts[0],
                        values.join(", ")
                    ),
                ));
            }
            let mut count = 1;
            if parts.len() == 2 {
                let c = parts[1];
                let n = (!c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| c.parse::<i128>().ok())
                    .flatten()
                    .filter(|n| *n > 0);
                match n {
                    Some(n) => count = n,
                    None => {
                        return Err(at(
                            path,
                            format!("invalid count '{c}': must be a positive integer"),
                        ));
                    }
                }
            }
            Ok(Node::Map(vec![
                (Node::Str("accelerator".into()), Node::Str(parts[0].into())),
                (Node::Str("count".into()), Node::Int(count)),
            ]))
        }
        other => Err(at(
            path,
            format!(
                "expected a string like \"A100\" or \"H100:8\", a mapping or null; got {}",
                super::kind(other)
            ),
        )),
    }
}

/// `use_volume: true` repos need a revision (for Hugging Face) and a folder.
fn model_repo_v2(input: &Node, path: &Path) -> Result<(), String> {
    let Node::Map(_) = input else {
        return Err(at(path, "expected a mapping with repo_id"));
    };
    if !input.get("use_volume").is_some_and(Node::truthy) {
        return Ok(());
    }
    let revision = input.get("revision").filter(|r| r.truthy());
    let is_hf = match input.get("kind") {
        None | Some(Node::Null) => true,
        Some(Node::Str(k)) => k == "hf",
        Some(_) => false,
    };
    if is_hf && revision.is_none() {
        let repo = input.get("repo_id").map(py::str_of).unwrap_or_default();
        return Err(at(
            path,
            format!(
                "revision is required for use_volume Hugging Face repos: pin a commit sha of {repo}"
            ),
        ));
    }
    let folder_ok = match input.get("volume_folder") {
        None | Some(Node::Null) => false,
        Some(Node::Str(s)) => !s.is_empty(),
        Some(Node::Seq(v)) => !v.is_empty(),
        Some(Node::Map(m)) => !m.is_empty(),
        Some(_) => false,
    };
    if !folder_ok {
        return Err(at(path, "volume_folder is required for use_volume repos"));
    }
    Ok(())
}

/// `mode="before"` field validators.
pub(super) fn before_field<'a>(model: &str, field: &str, v: &'a Node) -> Cow<'a, Node> {
    match (model, field, v) {
        ("Runtime", "transport", Node::Map(m)) if m.is_empty() => Cow::Owned(Node::Map(vec![(
            Node::Str("kind".into()),
            Node::Str("http".into()),
        )])),
        ("WeightsAuth" | "DockerAuthSettings", "auth_method", Node::Str(s)) => {
            Cow::Owned(Node::Str(s.to_uppercase()))
        }
        ("TrussConfig", "cache_internal", Node::Null) => Cow::Owned(Node::Seq(Vec::new())),
        _ => Cow::Borrowed(v),
    }
}

/// `mode="after"` field validators: they see the validated value.
pub(super) fn after_field(
    schema: &Schema,
    model: &str,
    field: &str,
    v: Value,
    path: &Path,
) -> Result<Value, String> {
    let s = v.as_str().unwrap_or_default();
    match (model, field) {
        ("Resources", "cpu") if py::parse_float(s).is_none() && !milli_cpu(s) => {
            return Err(at(
                path,
                format!(
                    "invalid cpu specification {s}: use a number as a string (\"1\", \"0.5\") or millicpus (\"500m\")"
                ),
            ));
        }
        ("Resources", "memory") => memory(s).map_err(|e| at(path, e))?,
        ("Runtime", "truss_server_version_override") if !v.is_null() && !pep440(s) => {
            return Err(at(
                path,
                format!("invalid version string `{s}`: it must parse as a version, e.g. '0.9.0'"),
            ));
        }
        ("ModelRepo" | "ModelRepoCacheInternal", "revision") if s.chars().count() == 1 => {
            return Err(at(path, "revision must be empty or at least 2 characters"));
        }
        ("WeightsSource", "source") => weights_source(s).map_err(|e| at(path, e))?,
        ("WeightsSource", "mount_location") if !s.starts_with('/') => {
            return Err(at(
                path,
                format!("mount_location must be an absolute path (start with /), got: {s}"),
            ));
        }
        ("BDNVolumeMount", "include" | "exclude") => {
            for p in v.as_array().into_iter().flatten().filter_map(Value::as_str) {
                bdn_filter(p).map_err(|e| at(path, e))?;
            }
        }
        ("BDNVolumeMount", "source") => bdn_source(s).map_err(|e| at(path, e))?,
        ("BDNVolumeMount", "path") => {
            return bdn_mount_path(s)
                .map(Value::String)
                .map_err(|e| at(path, e));
        }
        ("BDNAccess", "namespace") => bdn_identifier("namespace", s).map_err(|e| at(path, e))?,
        ("BDNAccess", "grants") => {
            let g = v.as_array().cloned().unwrap_or_default();
            if (1..g.len()).any(|i| g[..i].contains(&g[i])) {
                return Err(at(
                    path,
                    "BDN access grants must be unique within a namespace",
                ));
            }
        }
        ("BDNConfig", "mounts") => {
            let paths: Vec<&Value> = v
                .as_array()
                .into_iter()
                .flatten()
                .map(|m| &m["path"])
                .collect();
            if let Some(i) = (1..paths.len()).find(|&i| paths[..i].contains(&paths[i])) {
                return Err(at(
                    path,
                    format!(
                        "duplicate volume mount path {}: each volume needs its own path",
                        paths[i]
                    ),
                ));
            }
        }
        ("BDNConfig", "access") => {
            let ns: Vec<&Value> = v
                .as_array()
                .into_iter()
                .flatten()
                .map(|m| &m["namespace"])
                .collect();
            if (1..ns.len()).any(|i| ns[..i].contains(&ns[i])) {
                return Err(at(path, "BDN access namespaces must be unique"));
            }
        }
        ("BaseImage", "python_executable_path") if !s.is_empty() && !s.starts_with('/') => {
            return Err(at(
                path,
                format!("invalid relative python executable path {s}: provide an absolute path"),
            ));
        }
        ("DockerServer", "run_as_user_id") => {
            if let Some(id) = v.as_i64()
                && (id == 0 || id == schema.constants.default_non_root_user_id)
            {
                return Err(at(
                    path,
                    format!("run_as_user_id cannot be {id}: use a different user ID"),
                ));
            }
        }
        ("EgressRestrictions", "ip_allow_list") => {
            for e in v.as_array().into_iter().flatten().filter_map(Value::as_str) {
                ipv4_network(e).map_err(|m| at(path, format!("invalid IP or CIDR '{e}': {m}")))?;
            }
        }
        ("EgressRestrictions", "fqdn_allow_list") => {
            for e in v.as_array().into_iter().flatten().filter_map(Value::as_str) {
                if e.is_empty() {
                    return Err(at(path, "FQDN entries cannot be empty"));
                }
                if !fqdn(e) {
                    return Err(at(path, format!("invalid FQDN '{e}'")));
                }
            }
        }
        ("TrussConfig", "python_version") => {
            let ok = &schema.constants.supported_python_versions;
            if !ok.iter().any(|p| p == s) {
                return Err(at(
                    path,
                    format!("python_version must be one of {}", ok.join(", ")),
                ));
            }
        }
        _ => {}
    }
    Ok(v)
}

/// Root-model checks.
pub(super) fn after_root(name: &str, v: &Value, path: &Path) -> Result<(), String> {
    if name == "Weights" {
        let locs: Vec<&Value> = v
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| &s["mount_location"])
            .collect();
        if let Some(i) = (1..locs.len()).find(|&i| locs[..i].contains(&locs[i])) {
            return Err(at(
                path,
                format!(
                    "duplicate mount_location {}: each weights source needs its own mount path",
                    locs[i]
                ),
            ));
        }
    }
    Ok(())
}

fn empty(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Null)) || v.and_then(Value::as_str) == Some("")
}

/// `mode="after"` model validators.
pub(super) fn after_model(
    schema: &Schema,
    name: &str,
    m: &mut Map<String, Value>,
    input: &Node,
    path: &Path,
) -> Result<(), String> {
    trt_llm::after_model(schema, name, m, input, path)?;
    match name {
        "Runtime" => {
            let kind = m["transport"]["kind"]
                .as_str()
                .unwrap_or("http")
                .to_string();
            if m["is_websocket_endpoint"] == Value::Bool(true) && kind != "websocket" {
                m.insert(
                    "transport".into(),
                    serde_json::json!({"kind": "websocket", "ping_interval_seconds": null, "ping_timeout_seconds": null}),
                );
            }
            let ws = m["transport"]["kind"] == "websocket";
            m.insert("is_websocket_endpoint".into(), Value::Bool(ws));
        }
        "Build" => {
            let prefix = &schema.constants.registry_build_secret_prefix;
            let names: Vec<String> = m["secret_to_path_mapping"]
                .as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            for n in names {
                build_secret_name(&n, prefix).map_err(|e| at(path, e))?;
            }
        }
        "WeightsAuth" | "DockerAuthSettings" => {
            let own_secret = if name == "WeightsAuth" {
                "auth_secret_name"
            } else {
                "secret_name"
            };
            let method = m["auth_method"].as_str().unwrap_or_default().to_string();
            let aws = ["aws_oidc_role_arn", "aws_oidc_region"];
            let gcp = ["gcp_oidc_service_account", "gcp_oidc_workload_id_provider"];
            let role = ["aws_assume_role_arn", "aws_assume_role_region"];
            let secret = [own_secret];
            let groups: [&[&str]; 4] = [&secret, &aws, &gcp, &role];
            let required: Option<usize> = match method.as_str() {
                "CUSTOM_SECRET" if name == "WeightsAuth" => Some(0),
                "GCP_SERVICE_ACCOUNT_JSON" if name == "DockerAuthSettings" => Some(0),
                "AWS_OIDC" => Some(1),
                "GCP_OIDC" => Some(2),
                "AWS_ASSUME_ROLE" => Some(3),
                _ => None,
            };
            if let Some(r) = required {
                let missing: Vec<&str> = groups[r]
                    .iter()
                    .copied()
                    .filter(|f| empty(m.get(*f)))
                    .collect();
                if !missing.is_empty() {
                    return Err(at(
                        path,
                        format!(
                            "{} must be provided when auth_method is {method}",
                            missing.join(", ")
                        ),
                    ));
                }
                let present: Vec<&str> = groups
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != r)
                    .flat_map(|(_, g)| g.iter().copied())
                    .filter(|f| !empty(m.get(*f)))
                    .collect();
                if !present.is_empty() {
                    return Err(at(
                        path,
                        format!(
                            "{} cannot be specified when auth_method is {method}",
                            present.join(", ")
                        ),
                    ));
                }
            }
        }
        "WeightsSource" => {
            let top = m
                .get("auth_secret_name")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty());
            let inner = m
                .get("auth")
                .and_then(|a| a.get("auth_secret_name"))
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty());
            if top && inner {
                return Err(at(
                    path,
                    "auth_secret_name cannot be set both at the top level and in auth: keep one",
                ));
            }
        }
        "DockerServer" if m["no_build"] != Value::Bool(true) && m["start_command"].is_null() => {
            return Err(at(
                path,
                "start_command is required when no_build is not true",
            ));
        }
        "CheckpointList" => {
            let nonempty = |k: &str| m[k].as_array().is_some_and(|a| !a.is_empty());
            if nonempty("artifact_references") && nonempty("loops_checkpoint_ids") {
                return Err(at(
                    path,
                    "cannot mix artifact_references and loops_checkpoint_ids in one deploy: use one",
                ));
            }
        }
        "TrussConfig" => {
            let remote_ssh = m["runtime"]["remote_ssh"]["enabled"] == Value::Bool(true);
            if remote_ssh
                && !m["docker_server"].is_null()
                && !m["docker_server"]["run_as_user_id"].is_null()
            {
                return Err(at(
                    path,
                    "runtime.remote_ssh.enabled is not compatible with docker_server.run_as_user_id: SSH requires the default 'app' user",
                ));
            }
            let nonempty = |k: &str| match &m[k] {
                Value::Array(a) => !a.is_empty(),
                Value::String(s) => !s.is_empty(),
                _ => false,
            };
            if nonempty("requirements") && nonempty("requirements_file") {
                return Err(at(
                    path,
                    "set only one of `requirements` and `requirements_file`",
                ));
            }
            if nonempty("model_cache") && nonempty("weights") {
                return Err(at(path, "set only one of `model_cache` and `weights`"));
            }
            trt_llm::truss_config(schema, m, path)?;
        }
        _ => {}
    }
    Ok(())
}

/// Serializers: what `model_dump(mode="json")` writes for a model, given
/// the plain dump of its fields.
pub(super) fn serialize(
    name: &str,
    internal: &Map<String, Value>,
    mut out: Map<String, Value>,
) -> Value {
    match name {
        ACCELERATORS_MODEL => {
            let acc = internal.get("accelerator").and_then(Value::as_str);
            let count = internal.get("count").and_then(Value::as_i64).unwrap_or(1);
            match acc {
                Some(a) if count > 1 => Value::String(format!("{a}:{count}")),
                Some(a) if count > 0 => Value::String(a.to_string()),
                _ => Value::Null,
            }
        }
        "Resources" => {
            let falsy = |v: Option<&Value>| {
                matches!(v, None | Some(Value::Null))
                    || v == Some(&Value::from(0))
                    || v.and_then(Value::as_str) == Some("")
            };
            if falsy(out.get("node_count")) {
                out.remove("node_count");
            }
            if falsy(out.get("instance_type")) {
                out.remove("instance_type");
            }
            if out.get("fabric").is_some_and(Value::is_null) {
                out.remove("fabric");
            }
            let gpu = internal
                .get("accelerator")
                .is_some_and(|a| a.get("accelerator").is_some_and(|x| !x.is_null()));
            let gpu = gpu || internal.get("use_gpu") == Some(&Value::Bool(true));
            out.insert("use_gpu".into(), Value::Bool(gpu));
            Value::Object(out)
        }
        "FabricRequirement" => {
            out.retain(|_, v| !v.is_null());
            Value::Object(out)
        }
        _ => Value::Object(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_like_packaging() {
        for ok in [
            "0.9.0",
            "1",
            "v1.2",
            "1!2.0",
            "1.0rc1",
            "1.0.post1",
            "1.0-1",
            "1.0.dev0",
            "1.0+abc.1",
            " 1.0 ",
            "1.0a",
            "1.0-rc-1",
        ] {
            assert!(pep440(ok), "{ok}");
        }
        for bad in ["", "latest", "1.0.x", "1..0", "1.0+", "main"] {
            assert!(!pep440(bad), "{bad}");
        }
    }

    #[test]
    fn networks_parse_like_ipaddress() {
        for ok in [
            "1.2.3.4",
            "10.0.0.0/8",
            "10.0.0.1/8",
            "10.0.0.0/255.0.0.0",
            "0.0.0.0/0",
        ] {
            assert!(ipv4_network(ok).is_ok(), "{ok}");
        }
        for bad in [
            "1.2.3",
            "1.2.3.04",
            "256.1.1.1",
            "::1",
            "1.2.3.4/33",
            "1.2.3.4/255.0.255.0",
            "x",
        ] {
            assert!(ipv4_network(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bdn_paths_and_sources() {
        assert_eq!(bdn_mount_path("/a//b/./c/").unwrap(), "/a/b/c");
        assert!(bdn_mount_path("/").is_err());
        assert!(bdn_mount_path("/a/../b").is_err());
        assert!(bdn_mount_path("a").is_err());
        assert!(bdn_source("bdn:weights/llama:prod").is_ok());
        assert!(bdn_source("bdn:weights/llama@b3:0123456789abcdef").is_ok());
        assert!(bdn_source("bdn:weights/llama@0123").is_err());
        assert!(bdn_source("s3://x").is_err());
    }
}
