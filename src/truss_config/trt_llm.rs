//! truss's TRT-LLM checks (`truss/base/trt_llm_config.py`), ported one by
//! one: the `trt_llm` section's own validators, the defaults its hooks fill
//! in (encoder builds, lookahead draft lengths) and the checks `TrussConfig`
//! runs across `trt_llm`, `resources` and `model_metadata`.

use super::formats::hf_repo_id;
use super::yaml11::Node;
use super::{Path, Schema, Ty, at};
use serde_json::{Map, Value};

const BUILD: &str = "TrussTRTLLMBuildConfiguration";

/// The LoRA cache settings people put under `build` by mistake.
const RUNTIME_LORA_CACHE_FIELDS: [&str; 4] = [
    "lora_cache_gpu_memory_fraction",
    "lora_cache_host_memory_bytes",
    "lora_cache_max_adapter_size",
    "lora_cache_optimal_adapter_size",
];

/// Image versions the backend turns into image tags, so they must start
/// with a digit (`v2_llm_version` is not checked by truss).
const VERSIONS_STARTING_WITH_A_DIGIT: [&str; 4] = [
    "engine_builder_version",
    "briton_version",
    "bei_version",
    "bei_bert_version",
];

/// Base models truss renamed to `decoder`.
const RENAMED_BASE_MODELS: [&str; 5] = ["palmyra", "qwen", "llama", "mistral", "deepseek"];
const ENCODERS: [&str; 2] = ["encoder", "encoder_bert"];
const FP8_AND_FP4: [&str; 6] = [
    "fp8",
    "fp8_kv",
    "fp8_mlp_only",
    "fp4",
    "fp4_kv",
    "fp4_mlp_only",
];
const FP4: [&str; 3] = ["fp4", "fp4_kv", "fp4_mlp_only"];
/// GPUs older than compute capability 8.0, where TRT-LLM does not run.
const PRE_AMPERE: [&str; 2] = ["T4", "V100"];
/// GPUs without FP8 support (compute capability below 8.9).
const NO_FP8: [&str; 5] = ["A10G", "A100", "A100_40GB", "T4", "V100"];
/// GPUs without FP4 support (pre-Blackwell).
const NO_FP4: [&str; 6] = ["H100", "H100_40GB", "H200", "L4", "L40S", "A100_40GB"];
/// Build fields a v2 inference stack may change from their defaults.
const V2_MODIFIABLE_BUILD_FIELDS: [&str; 5] = [
    "checkpoint_repository",
    "quantization_type",
    "quantization_config",
    "skip_build_result",
    "num_builder_gpus",
];

/// `get_discriminator_value`: which inference stack a `trt_llm` mapping
/// is written for (v1 when it does not say).
pub(super) fn discriminate(n: &Node) -> Result<String, String> {
    let Node::Map(_) = n else {
        return Err("trt_llm must be a mapping with build: (and inference_stack: v1 or v2)".into());
    };
    match n.get("inference_stack") {
        Some(v) if v.truthy() => match v {
            Node::Str(s) if s == "v1" || s == "v2" => Ok(s.clone()),
            other => Err(format!(
                "inference_stack must be v1 or v2, got {}",
                super::py::repr(other)
            )),
        },
        _ => Ok("v1".into()),
    }
}

/// The stack a validated `trt_llm` section was read as.
pub(super) fn variant_of(m: &Map<String, Value>) -> Option<&str> {
    m.get("inference_stack").and_then(Value::as_str)
}

/// `mode="before"` model validators of the TRT-LLM models.
pub(super) fn before_model(name: &str, input: &Node, path: &Path) -> Result<(), String> {
    match name {
        BUILD => {
            let misplaced: Vec<&str> = RUNTIME_LORA_CACHE_FIELDS
                .into_iter()
                .filter(|f| input.get(f).is_some())
                .collect();
            if !misplaced.is_empty() && matches!(input, Node::Map(_)) {
                return Err(at(
                    path,
                    format!(
                        "{} must be configured under trt_llm.runtime, not trt_llm.build",
                        misplaced.join(", ")
                    ),
                ));
            }
        }
        "VersionsOverrides" => {
            let Node::Map(_) = input else {
                return Err(at(path, "expected a mapping of image versions"));
            };
            for f in VERSIONS_STARTING_WITH_A_DIGIT {
                match input.get(f) {
                    None | Some(Node::Null) => {}
                    Some(Node::Str(s)) if s.starts_with(|c: char| c.is_ascii_digit()) => {}
                    Some(_) => {
                        return Err(at(path, format!("{f} must start with a number")));
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn int(m: &Map<String, Value>, k: &str) -> Option<i64> {
    m.get(k).and_then(Value::as_i64)
}

fn text<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or_default()
}

/// Model validators that see the validated fields, with the hooks truss
/// runs in `__init__` and `model_post_init`. `input` is the raw mapping.
pub(super) fn after_model(
    schema: &Schema,
    name: &str,
    m: &mut Map<String, Value>,
    input: &Node,
    path: &Path,
) -> Result<(), String> {
    match name {
        "TrussTRTQuantizationConfiguration" => {
            for key in ["calib_size", "calib_max_seq_length"] {
                let v = int(m, key).unwrap_or_default();
                if !(64..=16384).contains(&v) {
                    return Err(at(
                        path,
                        format!("{key} must be between 64 and 16384, but got {v}"),
                    ));
                }
                if v % 64 != 0 {
                    return Err(at(
                        path,
                        format!("{key} must be a multiple of 64, but got {v}"),
                    ));
                }
            }
        }
        "CheckpointRepository" if text(m, "source") == "HF" => {
            hf_repo_id(text(m, "repo")).map_err(|e| {
                at(
                    path,
                    format!("Hugging Face repository validation failed: {e}"),
                )
            })?;
        }
        "TrussTRTLLMRuntimeConfiguration" => {
            if let (Some(max), Some(optimal)) = (
                int(m, "lora_cache_max_adapter_size"),
                int(m, "lora_cache_optimal_adapter_size"),
            ) && optimal > max
            {
                return Err(at(
                    path,
                    "lora_cache_optimal_adapter_size cannot be greater than lora_cache_max_adapter_size",
                ));
            }
        }
        BUILD => build(schema, m, input, path)?,
        "TrussSpeculatorConfiguration" => speculator(m, path)?,
        "TRTLLMConfigurationV1" => {
            let build = m["build"].as_object().cloned().unwrap_or_default();
            if build["checkpoint_repository"].is_null() {
                return Err(at(
                    path,
                    "build.checkpoint_repository is required for the v1 inference stack",
                ));
            }
            let plugins = &build["plugin_configuration"];
            let paged = plugins["use_paged_context_fmha"] == Value::Bool(true)
                && plugins["paged_kv_cache"] == Value::Bool(true);
            if m["runtime"]["enable_chunked_context"] == Value::Bool(true)
                && !ENCODERS.contains(&text(&build, "base_model"))
                && !paged
            {
                return Err(at(
                    path,
                    "runtime.enable_chunked_context needs build.plugin_configuration.use_paged_context_fmha and paged_kv_cache set to true",
                ));
            }
        }
        "TRTLLMConfigurationV2" => v2(schema, m, input, path)?,
        _ => {}
    }
    Ok(())
}

/// `TrussTRTLLMBuildConfiguration`: the encoder defaults of
/// `model_post_init`, the mixture-of-experts check, then the checks of its
/// `__init__`.
fn build(
    schema: &Schema,
    m: &mut Map<String, Value>,
    input: &Node,
    path: &Path,
) -> Result<(), String> {
    let base = text(m, "base_model").to_string();
    if ENCODERS.contains(&base.as_str()) {
        // Encoder artifacts are single-GPU: truss overrides the parallelism.
        for f in [
            "tensor_parallel_count",
            "pipeline_parallel_count",
            "sequence_parallel_count",
        ] {
            m.insert(f.into(), Value::from(1));
        }
    }
    if base == "encoder" {
        if input.get("max_num_tokens").is_none() {
            m.insert(
                "max_num_tokens".into(),
                Value::from(schema.constants.bei_required_max_num_tokens),
            );
        }
        if let Some(Value::Object(p)) = m.get_mut("plugin_configuration") {
            p.insert("paged_kv_cache".into(), Value::Bool(false));
            p.insert("use_paged_context_fmha".into(), Value::Bool(false));
        }
    }
    let moe = int(m, "moe_expert_parallel_option").unwrap_or(-1);
    let tp = int(m, "tensor_parallel_count").unwrap_or(1);
    if base == "decoder" && moe != -1 {
        if moe > tp {
            return Err(at(
                path,
                format!(
                    "moe_expert_parallel_option {moe} cannot be greater than tensor_parallel_count {tp}"
                ),
            ));
        }
        if moe <= 0 {
            return Err(at(
                path,
                format!("moe_expert_parallel_option {moe} must be positive or -1"),
            ));
        }
    }
    let plugins = &m["plugin_configuration"];
    let paged = plugins["paged_kv_cache"] == Value::Bool(true);
    let fmha = plugins["use_paged_context_fmha"] == Value::Bool(true);
    if !paged && fmha {
        return Err(at(
            path,
            "plugin_configuration.use_paged_context_fmha requires paged_kv_cache",
        ));
    }
    if let Some(spec) = m["speculator"].as_object() {
        if !(paged && fmha) {
            return Err(at(
                path,
                "speculative decoding needs KV cache block reuse: set plugin_configuration.paged_kv_cache and use_paged_context_fmha to true",
            ));
        }
        if text(spec, "speculative_decoding_mode") == "DRAFT_TOKENS_EXTERNAL" {
            return Err(at(
                path,
                "speculator: external draft speculation is discontinued; use speculative_decoding_mode: LOOKAHEAD_DECODING (or inference_stack: v2)",
            ));
        }
    }
    Ok(())
}

/// `TrussSpeculatorConfiguration.__init__`: the checkpoint and the draft
/// length, computed from the lookahead window when not given.
fn speculator(m: &mut Map<String, Value>, path: &Path) -> Result<(), String> {
    let draft_external = text(m, "speculative_decoding_mode") == "DRAFT_TOKENS_EXTERNAL";
    let has_checkpoint = !m["checkpoint_repository"].is_null();
    let has_build = !m["build"].is_null();
    if draft_external && has_checkpoint == has_build {
        return Err(at(
            path,
            "speculative decoding requires exactly one of checkpoint_repository or build",
        ));
    }
    let mut draft = int(m, "num_draft_tokens");
    if draft_external {
        if draft.is_none() {
            return Err(at(path, "draft external mode requires num_draft_tokens"));
        }
    } else {
        let (Some(w), Some(n), Some(v)) = (
            int(m, "lookahead_windows_size"),
            int(m, "lookahead_ngram_size"),
            int(m, "lookahead_verification_set_size"),
        ) else {
            return Err(at(
                path,
                "lookahead decoding requires lookahead_windows_size, lookahead_ngram_size and lookahead_verification_set_size",
            ));
        };
        let needed = lookahead_max_draft_len(w, n, v);
        if draft.is_none() {
            // truss assigns the computed length to a field that must be at
            // least 1, which an n-gram size of 1 does not give.
            if needed < 1 {
                return Err(at(
                    path,
                    "num_draft_tokens: lookahead_ngram_size 1 gives no draft tokens; set num_draft_tokens",
                ));
            }
            m.insert(
                "num_draft_tokens".into(),
                Value::from(i64::try_from(needed).unwrap_or(i64::MAX)),
            );
            draft = int(m, "num_draft_tokens");
        }
        if i128::from(draft.unwrap_or_default()) < needed {
            return Err(at(
                path,
                format!("num_draft_tokens is less than the {needed} the lookahead settings need"),
            ));
        }
    }
    let d = draft.unwrap_or_default();
    if !(0..=2048).contains(&d) {
        return Err(at(
            path,
            format!(
                "num_draft_tokens must be at most 2048, got {d}: lower it or the lookahead sizes"
            ),
        ));
    }
    Ok(())
}

/// The most tokens Baseten's lookahead algorithm drafts per step.
fn lookahead_max_draft_len(windows: i64, ngram: i64, verification: i64) -> i128 {
    let (w, n, v) = (
        i128::from(windows),
        i128::from(ngram),
        i128::from(verification),
    );
    let base = if n == 1 { 0 } else { n - 2 };
    base + (w - 1 + v) * (n - 1)
}

/// `TRTLLMConfigurationV2.validate_inference_stack_v2`: a checkpoint unless
/// the build is skipped, and no build field set away from its default
/// except those the v2 stack reads.
fn v2(schema: &Schema, m: &Map<String, Value>, input: &Node, path: &Path) -> Result<(), String> {
    let build = m["build"].as_object().cloned().unwrap_or_default();
    if build["checkpoint_repository"].is_null() && build["skip_build_result"] != Value::Bool(true) {
        return Err(at(
            path,
            "build.checkpoint_repository is required for the v2 inference stack unless build.skip_build_result is true",
        ));
    }
    let raw = input.get("build").unwrap_or(&Node::Null);
    let Node::Map(entries) = raw else {
        return Ok(());
    };
    for f in &schema.def(BUILD).fields {
        if V2_MODIFIABLE_BUILD_FIELDS.contains(&f.name.as_str()) {
            continue;
        }
        let Some(key) = f.key_in(entries) else {
            continue;
        };
        let given = raw.get(key).unwrap_or(&Node::Null);
        // truss compares the dump of the fields that were set, so a nested
        // model written partly differs from its default even when the
        // values written are the defaults.
        if set_fields(schema, &f.ty, given, &build[&f.name]) != f.default {
            return Err(at(
                path,
                format!(
                    "build.{} cannot be changed from its default with the v2 inference stack",
                    f.name
                ),
            ));
        }
    }
    Ok(())
}

/// A validated value dumped with only the fields its input set (pydantic's
/// `exclude_unset`).
fn set_fields(schema: &Schema, ty: &Ty, raw: &Node, v: &Value) -> Value {
    match (ty, raw, v) {
        (Ty::Nullable { of }, _, _) if !v.is_null() => set_fields(schema, of, raw, v),
        (Ty::Model { name }, Node::Map(entries), Value::Object(all)) => {
            let def = schema.def(name);
            let mut out = Map::new();
            for (k, x) in all {
                match def.fields.iter().find(|f| &f.name == k) {
                    Some(f) => {
                        if let Some(key) = f.key_in(entries) {
                            let r = raw.get(key).unwrap_or(&Node::Null);
                            out.insert(k.clone(), set_fields(schema, &f.ty, r, x));
                        }
                    }
                    // Unknown keys kept by the model count as set.
                    None => {
                        out.insert(k.clone(), x.clone());
                    }
                }
            }
            Value::Object(out)
        }
        _ => v.clone(),
    }
}

/// `trt_llm_validation`, run by `TrussConfig`: what the GPU and the tags
/// must be for the `trt_llm` section.
pub(super) fn truss_config(
    schema: &Schema,
    m: &Map<String, Value>,
    path: &Path,
) -> Result<(), String> {
    let Some(trt) = m["trt_llm"].as_object() else {
        return Ok(());
    };
    let build = trt["build"].as_object().cloned().unwrap_or_default();
    let base = text(&build, "base_model");
    let quant = text(&build, "quantization_type");
    let spec = &m["resources"]["accelerator"];
    let gpu = spec["accelerator"].as_str().unwrap_or_default();
    if RENAMED_BASE_MODELS.contains(&base) {
        return Err(at(
            path,
            format!(
                "trt_llm.build.base_model {base} has been renamed to `decoder`, which detects the architecture from the checkpoint: set base_model: decoder"
            ),
        ));
    }
    if base == "whisper" {
        return Err(at(
            path,
            "trt_llm.build.base_model whisper is no longer supported by truss: Whisper models are deployed as a Chain",
        ));
    }
    if PRE_AMPERE.contains(&gpu) {
        if base != "encoder_bert" {
            return Err(at(
                path,
                format!(
                    "trt_llm: TRT-LLM is not supported on {gpu}: use an A10G, A100 or newer GPU"
                ),
            ));
        }
    } else if FP8_AND_FP4.contains(&quant) && NO_FP8.contains(&gpu) {
        return Err(at(
            path,
            format!(
                "trt_llm.build.quantization_type: {quant} is not supported on {gpu}: use L4, H100, H200, B200 or newer"
            ),
        ));
    } else if FP4.contains(&quant) && NO_FP4.contains(&gpu) {
        return Err(at(
            path,
            format!(
                "trt_llm.build.quantization_type: {quant} needs a B200 (Blackwell) or newer, not {gpu}"
            ),
        ));
    }
    if variant_of(trt) != Some("v1") {
        return Ok(());
    }
    if !ENCODERS.contains(&base) {
        let c = &schema.constants;
        let compatible = has_tag(&m["model_metadata"], &c.openai_compatible_tag, path)?;
        let legacy = has_tag(&m["model_metadata"], &c.openai_non_compatible_tag, path)?;
        if compatible && legacy {
            return Err(at(
                path,
                format!(
                    "model_metadata.tags: keep only one of '{}' and '{}' for a TRT-LLM model",
                    c.openai_compatible_tag, c.openai_non_compatible_tag
                ),
            ));
        }
    }
    let world = [
        "tensor_parallel_count",
        "pipeline_parallel_count",
        "sequence_parallel_count",
    ]
    .iter()
    .try_fold(1i128, |acc, f| {
        acc.checked_mul(i128::from(int(&build, f).unwrap_or(1)))
    });
    let count = spec["count"].as_i64().unwrap_or(1);
    if base == "decoder" && world != Some(i128::from(count)) {
        return Err(at(
            path,
            format!(
                "trt_llm.build: TRT-LLM needs tensor_parallel_count x pipeline_parallel_count x sequence_parallel_count to equal the GPU count {count}: set resources.accelerator to {gpu}:<that product>, or change the parallelism"
            ),
        ));
    }
    Ok(())
}

/// Python's `tag in model_metadata.get("tags", [])`: list membership,
/// substring of a string, key of a mapping; other values cannot be searched.
fn has_tag(metadata: &Value, tag: &str, path: &Path) -> Result<bool, String> {
    match metadata.get("tags") {
        None => Ok(false),
        Some(Value::Array(a)) => Ok(a.iter().any(|x| x.as_str() == Some(tag))),
        Some(Value::String(s)) => Ok(s.contains(tag)),
        Some(Value::Object(o)) => Ok(o.contains_key(tag)),
        Some(_) => Err(at(
            path,
            "model_metadata.tags must be a list of tags for a TRT-LLM model",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hf_repo_ids_follow_huggingface_hub() {
        for ok in ["a", "a/b", "Foo-BAR_foo.bar123", "_x/y_", "123"] {
            assert!(hf_repo_id(ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(97);
        for bad in [
            "", "a/b/c", ".a", "a-", "a/.b", "a--b", "a..b", "a/b.git", "café", "a b", &long,
        ] {
            assert!(hf_repo_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lookahead_draft_length() {
        assert_eq!(lookahead_max_draft_len(7, 5, 3), 39);
        assert_eq!(lookahead_max_draft_len(8, 1, 1), 0);
        assert_eq!(lookahead_max_draft_len(4, 3, 3), 13);
    }
}
