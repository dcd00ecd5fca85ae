//! GraphQL root fields over the fake platform, and the object graph their
//! selections walk. Objects are resolved lazily, field by field, so a
//! response holds exactly the fields the document asked for.

use serde_json::{Map, Value, json};

use crate::graphql::{GqlError, OpKind, Prepared, RootCall, Sel, error_body};
use crate::s3::FakeS3;
use crate::state;
use crate::state::{
    ApiErr, ChainletInput, CreateKind, CreateModel, DeployChain, PRODUCTION, Platform,
};

/// A node of the response graph.
#[derive(Clone, Debug)]
enum Node {
    Null,
    Leaf(Value),
    List(Vec<Node>),
    Team(String),
    Model(String),
    Version(String),
    DeploymentStatus(String),
    InstanceType(String),
    Chain(String),
    ChainDeployment(String),
    Chainlet(String, usize),
    Organization,
    User,
    Obj(&'static str, Vec<(&'static str, Node)>),
}

/// Everything a resolver may touch.
pub struct Exec<'a> {
    pub platform: &'a mut Platform,
    pub now: f64,
    pub s3: &'a FakeS3,
}

/// Runs a validated operation and returns the response body.
pub fn execute(exec: &mut Exec<'_>, op: &Prepared) -> Value {
    let mut data = Map::new();
    for call in &op.roots {
        match resolve_root(exec, op.kind, call) {
            Ok(node) => {
                let v = render(exec, &node, &call.selection);
                data.insert(call.key.clone(), v);
            }
            Err(e) => {
                return error_body(&[GqlError {
                    message: e.message,
                    line_col: Some(call.line_col),
                    path: Some(vec![call.key.clone()]),
                    code: e.code.to_string(),
                }]);
            }
        }
    }
    json!({ "data": data })
}

fn s(args: &Map<String, Value>, k: &str) -> Option<String> {
    args.get(k).and_then(Value::as_str).map(str::to_string)
}

fn b(args: &Map<String, Value>, k: &str) -> Option<bool> {
    args.get(k).and_then(Value::as_bool)
}

fn resolve_root(exec: &mut Exec<'_>, kind: OpKind, call: &RootCall) -> Result<Node, ApiErr> {
    let a = &call.args;
    let p = &mut *exec.platform;
    let now = exec.now;
    let s3 = exec.s3;
    let exists = |key: &str| s3.object_exists(key);
    Ok(match (kind, call.name.as_str()) {
        (OpKind::Query, "teams") => {
            Node::List(p.teams.iter().map(|t| Node::Team(t.id.clone())).collect())
        }
        (OpKind::Query, "models") => {
            let team = s(a, "team_id");
            let chainlets_only = b(a, "chainlets_only").unwrap_or(false);
            Node::List(
                p.models
                    .iter()
                    .filter(|m| team.as_ref().is_none_or(|t| &m.team_id == t))
                    .filter(|m| (m.origin == "CHAINS") == chainlets_only)
                    .map(|m| Node::Model(m.id.clone()))
                    .collect(),
            )
        }
        (OpKind::Query, "chains") => {
            let team = s(a, "team_id");
            Node::List(
                p.chains
                    .iter()
                    .filter(|c| team.as_ref().is_none_or(|t| &c.team_id == t))
                    .map(|c| Node::Chain(c.id.clone()))
                    .collect(),
            )
        }
        (OpKind::Query, "truss_validation") => {
            let spec = &p.scenario.truss_validation;
            let (success, warnings, mut errors) =
                (spec.success, spec.warnings.clone(), spec.errors.clone());
            let mut success = success;
            if let Err(e) = state::decode_config(&s(a, "config").unwrap_or_default()) {
                success = false;
                errors.push(e);
            }
            let details = json!({"warnings": warnings, "errors": errors}).to_string();
            Node::Obj(
                "TrussValidationType",
                vec![
                    ("success", Node::Leaf(json!(success))),
                    ("details", Node::Leaf(json!(details))),
                ],
            )
        }
        (OpKind::Query, "model_s3_upload_credentials") => credentials(p, s3, "models"),
        (OpKind::Query, "chain_s3_upload_credentials") => credentials(p, s3, "chains"),
        (OpKind::Query, "chain") => {
            let id = s(a, "id")
                .or_else(|| a.get("id").map(|v| v.to_string()))
                .unwrap_or_default();
            p.chain(&id)
                .ok_or_else(|| ApiErr::not_found(format!("Chain `{id}` not found")))?;
            Node::Chain(id)
        }
        (OpKind::Query, "chain_deployment") => {
            let id = s(a, "id").unwrap_or_default();
            p.chain_deployment(&id)
                .ok_or_else(|| ApiErr::not_found(format!("Chain deployment `{id}` not found")))?;
            Node::ChainDeployment(id)
        }
        (OpKind::Query, "model") => {
            let found = match (s(a, "id"), s(a, "name")) {
                (Some(id), _) => p.model(&id).map(|m| m.id.clone()),
                (None, Some(name)) => p
                    .models
                    .iter()
                    .find(|m| m.name == name && m.origin != "CHAINS")
                    .map(|m| m.id.clone()),
                (None, None) => None,
            };
            Node::Model(found.ok_or_else(|| ApiErr::not_found("Model not found"))?)
        }
        (OpKind::Query, "model_version") => {
            let id = s(a, "id").unwrap_or_default();
            p.deployment(&id)
                .ok_or_else(|| ApiErr::not_found(format!("Model version `{id}` not found")))?;
            Node::Version(id)
        }
        (OpKind::Query, "organization") => Node::Organization,
        (OpKind::Query, "user") => Node::User,
        (
            OpKind::Mutation,
            name @ ("create_model_from_truss"
            | "create_model_version_from_truss"
            | "deploy_draft_truss"),
        ) => {
            let (kind, payload) = match name {
                "create_model_from_truss" => (CreateKind::NewModel, "CreateModelFromTruss"),
                "create_model_version_from_truss" => {
                    (CreateKind::NewVersion, "CreateModelVersionFromTruss")
                }
                _ => (CreateKind::Draft, "DeployDraftTruss"),
            };
            let req = CreateModel {
                name: s(a, "name").filter(|_| kind != CreateKind::NewVersion),
                model_id: s(a, "model_id"),
                s3_key: s(a, "s3_key").unwrap_or_default(),
                config_b64: s(a, "config").unwrap_or_default(),
                semver_bump: s(a, "semver_bump"),
                deployment_name: match kind {
                    CreateKind::NewModel => s(a, "version_name"),
                    CreateKind::NewVersion => s(a, "name"),
                    CreateKind::Draft => None,
                },
                environment_name: s(a, "environment_name"),
                deploy_timeout_minutes: a.get("deploy_timeout_minutes").and_then(Value::as_i64),
                team_id: s(a, "team_id"),
                labels_json: s(a, "user_deploy_metadata"),
                truss_user_env: s(a, "truss_user_env"),
                raw_config_b64: s(a, "raw_config"),
                model_origin: s(a, "model_origin"),
            };
            let id = p.create_model_deployment(kind, req, now, &exists)?;
            Node::Obj(payload, vec![("model_version", Node::Version(id))])
        }
        (OpKind::Mutation, "deploy_chain_atomic") => {
            let chainlet = |v: &Value| ChainletInput {
                name: v["name"].as_str().unwrap_or_default().to_string(),
                model_name: v["oracle"]["model_name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                s3_key: v["oracle"]["s3_key"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                encoded_config_str: v["oracle"]["encoded_config_str"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                semver_bump: v["oracle"]["semver_bump"].as_str().map(str::to_string),
                version_name: v["oracle"]["version_name"].as_str().map(str::to_string),
            };
            let req = DeployChain {
                chain_id: s(a, "chain_id"),
                chain_name: s(a, "chain_name"),
                environment: s(a, "environment"),
                team_id: s(a, "team_id"),
                is_draft: b(a, "is_draft").unwrap_or(false),
                deployment_name: s(a, "deployment_name"),
                original_source_artifact_s3_key: s(a, "original_source_artifact_s3_key"),
                truss_user_env: s(a, "truss_user_env"),
                entrypoint: chainlet(a.get("entrypoint").unwrap_or(&Value::Null)),
                dependencies: a
                    .get("dependencies")
                    .and_then(Value::as_array)
                    .map(|v| v.iter().filter(|x| !x.is_null()).map(chainlet).collect())
                    .unwrap_or_default(),
            };
            let id = p.deploy_chain(req, now, &exists)?;
            Node::Obj(
                "DeployChainAtomic",
                vec![("chain_deployment", Node::ChainDeployment(id))],
            )
        }
        (_, other) => {
            // Validation only lets schema fields through; this is a field
            // the schema lists but the fake does not serve.
            return Err(ApiErr::invalid(format!(
                "The fake does not serve `{other}`"
            )));
        }
    })
}

fn credentials(p: &mut Platform, s3: &FakeS3, prefix: &str) -> Node {
    let c = s3.issue_credentials(prefix);
    p.issue_key(&c.s3_key);
    Node::Obj(
        "S3CredentialsType",
        vec![
            ("s3_bucket", Node::Leaf(json!(c.s3_bucket))),
            ("s3_key", Node::Leaf(json!(c.s3_key))),
            ("aws_access_key_id", Node::Leaf(json!(c.aws_access_key_id))),
            (
                "aws_secret_access_key",
                Node::Leaf(json!(c.aws_secret_access_key)),
            ),
            ("aws_session_token", Node::Leaf(json!(c.aws_session_token))),
        ],
    )
}

fn typename(node: &Node) -> &'static str {
    match node {
        Node::Team(_) => "TeamType",
        Node::Model(_) => "OracleType",
        Node::Version(_) => "OracleVersionType",
        Node::DeploymentStatus(_) => "ModelDeploymentStatusType",
        Node::InstanceType(_) => "InstanceTypeType",
        Node::Chain(_) => "ChainType",
        Node::ChainDeployment(_) => "ChainDeploymentType",
        Node::Chainlet(..) => "ChainletType",
        Node::Organization => "OrganizationType",
        Node::User => "UserType",
        Node::Obj(t, _) => t,
        Node::Null | Node::Leaf(_) | Node::List(_) => "",
    }
}

fn render(exec: &Exec<'_>, node: &Node, sels: &[Sel]) -> Value {
    match node {
        Node::Null => Value::Null,
        Node::Leaf(v) => v.clone(),
        Node::List(items) => Value::Array(items.iter().map(|n| render(exec, n, sels)).collect()),
        obj => {
            let mut out = Map::new();
            for sel in sels {
                let v = if sel.name == "__typename" {
                    json!(typename(obj))
                } else {
                    render(exec, &field(exec, obj, &sel.name), &sel.children)
                };
                out.insert(sel.key.clone(), v);
            }
            Value::Object(out)
        }
    }
}

fn leaf(v: impl Into<Value>) -> Node {
    Node::Leaf(v.into())
}

fn opt<T>(o: Option<T>, f: impl FnOnce(T) -> Node) -> Node {
    o.map(f).unwrap_or(Node::Null)
}

fn field(exec: &Exec<'_>, node: &Node, name: &str) -> Node {
    let p = &*exec.platform;
    let now = exec.now;
    match node {
        Node::Team(id) => {
            let Some(t) = p.team(id) else {
                return Node::Null;
            };
            match name {
                "id" => leaf(t.id.clone()),
                "name" => leaf(t.name.clone()),
                "default" => leaf(t.default),
                _ => Node::Null,
            }
        }
        Node::Model(id) => {
            let Some(m) = p.model(id) else {
                return Node::Null;
            };
            match name {
                "id" => leaf(m.id.clone()),
                "name" => leaf(m.name.clone()),
                "hostname" => leaf(p.hostname("model", &m.id)),
                "created" => leaf(p.scenario_iso(m.created_at)),
                "team" => Node::Team(m.team_id.clone()),
                "versions" => Node::List(
                    p.model_deployments(&m.id)
                        .map(|d| Node::Version(d.id.clone()))
                        .collect(),
                ),
                "primary_version" => opt(p.env_current(&m.id, PRODUCTION, now), Node::Version),
                _ => Node::Null,
            }
        }
        Node::Version(id) => {
            let Some(d) = p.deployment(id) else {
                return Node::Null;
            };
            match name {
                "id" => leaf(d.id.clone()),
                "name" => leaf(d.name.clone()),
                "semver" => leaf(d.semver.clone()),
                "truss_hash" => leaf(format!("{:0>40}", d.id)),
                "truss_signature" => leaf(""),
                "is_draft" => leaf(d.is_draft),
                "is_primary" => {
                    leaf(p.env_current(&d.model_id, PRODUCTION, now).as_deref() == Some(&d.id))
                }
                "created" => leaf(p.scenario_iso(d.created_at)),
                "current_model_deployment_status" => Node::DeploymentStatus(d.raw_status(now)),
                "oracle" => Node::Model(d.model_id.clone()),
                "instance_type" => Node::InstanceType(d.instance_type_name.clone()),
                _ => Node::Null,
            }
        }
        Node::DeploymentStatus(st) => match name {
            "status" => leaf(st.clone()),
            _ => Node::Null,
        },
        Node::InstanceType(n) => match name {
            "id" | "name" => leaf(n.clone()),
            _ => Node::Null,
        },
        Node::Chain(id) => {
            let Some(c) = p.chain(id) else {
                return Node::Null;
            };
            match name {
                "id" => leaf(c.id.clone()),
                "name" => leaf(c.name.clone()),
                "hostname" => leaf(p.hostname("chain", &c.id)),
                "created" => leaf(p.scenario_iso(c.created_at)),
                "team" => Node::Team(c.team_id.clone()),
                "deployments" => Node::List(
                    p.chain_deployments
                        .iter()
                        .filter(|cd| cd.chain_id == c.id)
                        .map(|cd| Node::ChainDeployment(cd.id.clone()))
                        .collect(),
                ),
                _ => Node::Null,
            }
        }
        Node::ChainDeployment(id) => {
            let Some(cd) = p.chain_deployment(id) else {
                return Node::Null;
            };
            match name {
                "id" => leaf(cd.id.clone()),
                "created" => leaf(p.scenario_iso(cd.created_at)),
                "is_draft" => leaf(cd.is_draft),
                "chain" => Node::Chain(cd.chain_id.clone()),
                "chainlets" => Node::List(
                    (0..cd.chainlets.len())
                        .map(|i| Node::Chainlet(cd.id.clone(), i))
                        .collect(),
                ),
                _ => Node::Null,
            }
        }
        Node::Chainlet(cd_id, i) => {
            let Some(c) = p
                .chain_deployment(cd_id)
                .and_then(|cd| cd.chainlets.get(*i))
            else {
                return Node::Null;
            };
            match name {
                "id" => leaf(c.id.clone()),
                "name" => leaf(c.name.clone()),
                "is_entrypoint" => leaf(c.is_entrypoint),
                "oracle" => Node::Model(c.model_id.clone()),
                "oracle_version" => Node::Version(c.deployment_id.clone()),
                _ => Node::Null,
            }
        }
        Node::Organization => match name {
            "id" => leaf("org00001"),
            "workspace_name" => leaf(p.scenario.workspace_name.clone()),
            _ => Node::Null,
        },
        Node::User => match name {
            "id" => leaf("user0001"),
            "email" => leaf(p.scenario.user_email.clone()),
            _ => Node::Null,
        },
        Node::Obj(_, fields) => fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or(Node::Null),
        Node::Null | Node::Leaf(_) | Node::List(_) => Node::Null,
    }
}
