//! GraphQL for chains: listing, upload credentials, the atomic chain
//! deployment, and chainlet statuses (raw internal names, untranslated).

use serde_json::{Value, json};

use super::models::{named, team_arg};
use super::{Api, ApiError, Named, UploadCredentials, gql_str, id};
use crate::retry::Policy;

/// One chainlet's part of `deploy_chain_atomic` (`ChainletDataAtomic`).
#[derive(Clone, Debug)]
pub(crate) struct ChainletData {
    pub(crate) display_name: String,
    pub(crate) model_name: String,
    pub(crate) s3_key: String,
    pub(crate) encoded_config: String,
    pub(crate) version_name: Option<String>,
}

/// Everything `deploy_chain_atomic` takes.
#[derive(Clone, Debug)]
pub(crate) struct DeployChainRequest<'a> {
    pub(crate) existing_chain_id: Option<&'a str>,
    pub(crate) chain_name: &'a str,
    pub(crate) environment: Option<&'a str>,
    pub(crate) source_s3_key: Option<&'a str>,
    pub(crate) team_id: Option<&'a str>,
    pub(crate) deployment_name: Option<&'a str>,
    pub(crate) entrypoint: &'a ChainletData,
    pub(crate) dependencies: &'a [ChainletData],
}

/// What `deploy_chain_atomic` returns.
#[derive(Clone, Debug)]
pub(crate) struct ChainDeployed {
    pub(crate) chain_deployment_id: String,
    pub(crate) chain_id: String,
}

/// One chainlet as the `chain_deployment` query reports it; `status` is the
/// raw internal status.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ChainletStatus {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) is_entrypoint: bool,
    pub(crate) status: String,
}

impl Api {
    /// Chains visible to the key, in one team or all.
    pub(crate) async fn chains(&self, team_id: Option<&str>) -> Result<Vec<Named>, ApiError> {
        let what = "listing chains";
        let q = format!(
            "query {{ chains({}) {{ id name team {{ id name }} }} }}",
            team_arg(team_id)
        );
        let d = self.query(what, &q, None).await?;
        named(&d, "chains", what)
    }

    pub(crate) async fn chain_upload_credentials(&self) -> Result<UploadCredentials, ApiError> {
        self.upload_credentials("chain_s3_upload_credentials").await
    }

    /// Creates the chain deployment; sent again only when it surely never
    /// arrived, because a resend after an ambiguous failure could create a
    /// second chain deployment.
    pub(crate) async fn deploy_chain_atomic(
        &self,
        r: &DeployChainRequest<'_>,
        truss_user_env: &str,
    ) -> Result<ChainDeployed, ApiError> {
        let what = "creating the chain deployment";
        let d = self
            .graphql(
                Policy::MUTATION,
                what,
                &deploy_chain_document(r),
                Some(json!({ "trussUserEnv": truss_user_env })),
            )
            .await?;
        let cd = &d["deploy_chain_atomic"]["chain_deployment"];
        Ok(ChainDeployed {
            chain_deployment_id: id::answered(what, "chain_deployment.id", &cd["id"])?,
            chain_id: id::answered(what, "chain_deployment.chain.id", &cd["chain"]["id"])?,
        })
    }

    /// One status read of a chain deployment; the wait loop owns retries.
    pub(crate) async fn chain_deployment_status(
        &self,
        chain_deployment_id: &str,
    ) -> Result<Vec<ChainletStatus>, ApiError> {
        let q = format!(
            "query {{ chain_deployment(id: {}) {{ chainlets {{ id name is_entrypoint oracle_version {{ id current_model_deployment_status {{ status }} }} }} chain {{ id }} }} }}",
            gql_str(chain_deployment_id)
        );
        let what = "reading the chain deployment status";
        let d = self.graphql_once(what, &q, None).await?;
        read_chainlets(what, &d["chain_deployment"]["chainlets"])
    }
}

fn chainlet_literal(c: &ChainletData) -> String {
    let mut oracle = vec![
        format!("model_name: {}", gql_str(&c.model_name)),
        format!("s3_key: {}", gql_str(&c.s3_key)),
        format!("encoded_config_str: {}", gql_str(&c.encoded_config)),
        "semver_bump: \"MINOR\"".to_string(),
    ];
    if let Some(v) = &c.version_name {
        oracle.push(format!("version_name: {}", gql_str(v)));
    }
    format!(
        "{{ name: {}, oracle: {{ {} }} }}",
        gql_str(&c.display_name),
        oracle.join(", ")
    )
}

/// The `deploy_chain_atomic` document; every string is a GraphQL literal.
fn deploy_chain_document(r: &DeployChainRequest<'_>) -> String {
    let mut args = Vec::new();
    match r.existing_chain_id {
        Some(id) => args.push(format!("chain_id: {}", gql_str(id))),
        None => args.push(format!("chain_name: {}", gql_str(r.chain_name))),
    }
    if let Some(env) = r.environment {
        args.push(format!("environment: {}", gql_str(env)));
    }
    if let Some(k) = r.source_s3_key {
        args.push(format!("original_source_artifact_s3_key: {}", gql_str(k)));
    }
    if let Some(t) = r.team_id {
        args.push(format!("team_id: {}", gql_str(t)));
    }
    args.push("is_draft: false".into());
    if let Some(n) = r.deployment_name {
        args.push(format!("deployment_name: {}", gql_str(n)));
    }
    args.push(format!("entrypoint: {}", chainlet_literal(r.entrypoint)));
    args.push(format!(
        "dependencies: [{}]",
        r.dependencies
            .iter()
            .map(chainlet_literal)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    args.push("truss_user_env: $trussUserEnv".into());
    format!(
        "mutation ($trussUserEnv: String) {{\n  deploy_chain_atomic(\n    {}\n  ) {{\n    chain_deployment {{ id chain {{ id hostname }} }}\n  }}\n}}",
        args.join("\n    ")
    )
}

/// Reads the chainlet list leniently: a missing status is an empty one
/// (in progress), never a crash; a chainlet id or status present but not
/// one the run would use is the platform's error.
fn read_chainlets(what: &str, v: &Value) -> Result<Vec<ChainletStatus>, ApiError> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    Ok(ChainletStatus {
                        id: id::optional(what, "chainlet id", c.get("id"))?.unwrap_or_default(),
                        name: c["name"].as_str().unwrap_or_default().to_string(),
                        is_entrypoint: c["is_entrypoint"].as_bool().unwrap_or(false),
                        status: id::check_status(
                            c.pointer("/oracle_version/current_model_deployment_status/status")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .trim(),
                        )
                        .map_err(|e| id::refused(what, "chainlet status", &e))?
                        .to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or(Ok(Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chainlets_are_read_leniently() {
        let v = json!([
            {"id": "c1", "name": "Entry", "is_entrypoint": true,
             "oracle_version": {"current_model_deployment_status": {"status": " MODEL_READY "}}},
            {"id": "c2", "name": "Dep", "oracle_version": null},
        ]);
        let got = read_chainlets("w", &v).unwrap();
        assert_eq!(got[0].status, "MODEL_READY");
        assert!(got[0].is_entrypoint);
        assert_eq!(got[1].status, "");
        assert!(!got[1].is_entrypoint);
        assert!(read_chainlets("w", &Value::Null).unwrap().is_empty());
        let hostile = json!([{"id": "c1$(id)", "name": "Entry"}]);
        let e = read_chainlets("w", &hostile).unwrap_err().to_string();
        assert!(e.contains(r#""c1\u{24}\u{28}id\u{29}""#), "{e}");
    }

    fn data(name: &str) -> ChainletData {
        ChainletData {
            display_name: name.into(),
            model_name: format!("{name}-0123abcd"),
            s3_key: format!("models/{name}.tgz"),
            encoded_config: "e30=".into(),
            version_name: Some("v\"1".into()),
        }
    }

    #[test]
    fn deploy_document_escapes_and_picks_chain_id_or_name() {
        let (e, d) = (data("Entry"), [data("Dep")]);
        let req = |id: Option<&'static str>| DeployChainRequest {
            existing_chain_id: id,
            chain_name: "my \"chain\"\n} evil {",
            environment: Some("stag\"ing"),
            source_s3_key: Some("chains/src.tgz"),
            team_id: Some("team1"),
            deployment_name: Some("ci-1"),
            entrypoint: &e,
            dependencies: &d,
        };
        let new = deploy_chain_document(&req(None));
        assert!(
            new.contains(r#"chain_name: "my \"chain\"\n} evil {""#),
            "{new}"
        );
        assert!(!new.contains("chain_id"), "{new}");
        assert!(new.contains(r#"environment: "stag\"ing""#), "{new}");
        assert!(new.contains(r#"version_name: "v\"1""#), "{new}");
        assert!(new.contains(r#"dependencies: [{ name: "Dep""#), "{new}");
        assert!(new.contains("truss_user_env: $trussUserEnv"), "{new}");
        let existing = deploy_chain_document(&req(Some("c\"1")));
        assert!(existing.contains(r#"chain_id: "c\"1""#), "{existing}");
        assert!(!existing.contains("chain_name"), "{existing}");
        let none = deploy_chain_document(&DeployChainRequest {
            dependencies: &[],
            ..req(None)
        });
        assert!(none.contains("dependencies: []"), "{none}");
    }
}
