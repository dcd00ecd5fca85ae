//! GraphQL documents as the platform's server treats them: parsed with
//! `graphql-parser`, validated against the slice of Baseten's schema that
//! truss uses (field names, argument names and types, input objects,
//! variables), with variables substituted, before any resolver runs.
//!
//! Errors use the platform's shape: HTTP 200,
//! `{"data": null, "errors": [{"message", "locations", "extensions": {"code", "description"}}]}`.
//! Messages follow graphql-core's wording (`Cannot query field "x" on type "Y".`).

use std::collections::{BTreeMap, BTreeSet};

use graphql_parser::query::{
    Definition, Document, Field, FragmentDefinition, OperationDefinition, Selection, SelectionSet,
    Type, Value as GValue, VariableDefinition,
};
use serde_json::{Map, Value, json};

/// Output object types: name → fields with their GraphQL type.
const OBJECT_TYPES: &[(&str, &[(&str, &str)])] = &[
    (
        "Query",
        &[
            ("teams", "[TeamType]"),
            ("models", "[OracleType]"),
            ("chains", "[ChainType]"),
            ("truss_validation", "TrussValidationType"),
            ("model_s3_upload_credentials", "S3CredentialsType"),
            ("chain_s3_upload_credentials", "S3CredentialsType"),
            ("chain", "ChainType"),
            ("chain_deployment", "ChainDeploymentType"),
            ("model", "OracleType"),
            ("model_version", "OracleVersionType"),
            ("organization", "OrganizationType"),
            ("user", "UserType"),
        ],
    ),
    (
        "Mutation",
        &[
            ("create_model_from_truss", "CreateModelFromTruss"),
            (
                "create_model_version_from_truss",
                "CreateModelVersionFromTruss",
            ),
            ("deploy_draft_truss", "DeployDraftTruss"),
            ("deploy_chain_atomic", "DeployChainAtomic"),
        ],
    ),
    (
        "TeamType",
        &[("id", "ID!"), ("name", "String!"), ("default", "Boolean!")],
    ),
    (
        "OracleType",
        &[
            ("id", "ID!"),
            ("name", "String!"),
            ("hostname", "String"),
            ("created", "DateTime"),
            ("team", "TeamType"),
            ("versions", "[OracleVersionType]"),
            ("primary_version", "OracleVersionType"),
        ],
    ),
    (
        "OracleVersionType",
        &[
            ("id", "ID!"),
            ("name", "String"),
            ("semver", "String"),
            ("truss_hash", "String"),
            ("truss_signature", "String"),
            ("is_draft", "Boolean"),
            ("is_primary", "Boolean"),
            ("created", "DateTime"),
            (
                "current_model_deployment_status",
                "ModelDeploymentStatusType",
            ),
            ("oracle", "OracleType"),
            ("instance_type", "InstanceTypeType"),
        ],
    ),
    ("ModelDeploymentStatusType", &[("status", "String")]),
    ("InstanceTypeType", &[("id", "ID"), ("name", "String")]),
    (
        "TrussValidationType",
        &[("success", "Boolean"), ("details", "JSONString")],
    ),
    (
        "S3CredentialsType",
        &[
            ("s3_bucket", "String"),
            ("s3_key", "String"),
            ("aws_access_key_id", "String"),
            ("aws_secret_access_key", "String"),
            ("aws_session_token", "String"),
        ],
    ),
    (
        "ChainType",
        &[
            ("id", "ID!"),
            ("name", "String"),
            ("hostname", "String"),
            ("created", "DateTime"),
            ("team", "TeamType"),
            ("deployments", "[ChainDeploymentType]"),
        ],
    ),
    (
        "ChainDeploymentType",
        &[
            ("id", "ID!"),
            ("created", "DateTime"),
            ("is_draft", "Boolean"),
            ("chain", "ChainType"),
            ("chainlets", "[ChainletType]"),
        ],
    ),
    (
        "ChainletType",
        &[
            ("id", "ID!"),
            ("name", "String"),
            ("is_entrypoint", "Boolean"),
            ("oracle", "OracleType"),
            ("oracle_version", "OracleVersionType"),
        ],
    ),
    (
        "OrganizationType",
        &[
            ("id", "ID"),
            ("workspace_name", "String"),
            ("aws_customer_access_role_arn", "String"),
            ("aws_external_id", "String"),
        ],
    ),
    ("UserType", &[("id", "ID"), ("email", "String")]),
    (
        "CreateModelFromTruss",
        &[("model_version", "OracleVersionType")],
    ),
    (
        "CreateModelVersionFromTruss",
        &[("model_version", "OracleVersionType")],
    ),
    (
        "DeployDraftTruss",
        &[("model_version", "OracleVersionType")],
    ),
    (
        "DeployChainAtomic",
        &[("chain_deployment", "ChainDeploymentType")],
    ),
];

/// `[(name, GraphQL type)]`.
type Fields = &'static [(&'static str, &'static str)];

/// Arguments of root fields: (parent type, field, [(argument, type)]).
const ROOT_ARGS: &[(&str, &str, Fields)] = &[
    (
        "Query",
        "models",
        &[
            ("team_id", "String"),
            ("all", "Boolean"),
            ("chainlets_only", "Boolean"),
        ],
    ),
    (
        "Query",
        "chains",
        &[("team_id", "String"), ("all", "Boolean")],
    ),
    (
        "Query",
        "truss_validation",
        &[("config", "String!"), ("truss_user_env", "String")],
    ),
    ("Query", "chain", &[("id", "ID!")]),
    ("Query", "chain_deployment", &[("id", "ID!")]),
    ("Query", "model", &[("id", "ID"), ("name", "String")]),
    ("Query", "model_version", &[("id", "ID!")]),
    (
        "Mutation",
        "create_model_from_truss",
        &[
            ("name", "String!"),
            ("s3_key", "String!"),
            ("config", "String!"),
            ("semver_bump", "String"),
            ("truss_user_env", "String"),
            ("allow_truss_download", "Boolean"),
            ("version_name", "String"),
            ("model_origin", "ModelOrigin"),
            ("environment_name", "String"),
            ("deploy_timeout_minutes", "Int"),
            ("team_id", "String"),
            ("user_deploy_metadata", "JSONString"),
            ("raw_config", "String"),
        ],
    ),
    (
        "Mutation",
        "create_model_version_from_truss",
        &[
            ("model_id", "String!"),
            ("s3_key", "String!"),
            ("config", "String!"),
            ("semver_bump", "String"),
            ("truss_user_env", "String"),
            ("scale_down_old_production", "Boolean"),
            ("preserve_env_instance_type", "Boolean"),
            ("name", "String"),
            ("environment_name", "String"),
            ("deploy_timeout_minutes", "Int"),
            ("user_deploy_metadata", "JSONString"),
            ("raw_config", "String"),
        ],
    ),
    (
        "Mutation",
        "deploy_draft_truss",
        &[
            ("name", "String!"),
            ("s3_key", "String!"),
            ("config", "String!"),
            ("truss_user_env", "String"),
            ("allow_truss_download", "Boolean"),
            ("model_origin", "ModelOrigin"),
            ("deploy_timeout_minutes", "Int"),
            ("team_id", "String"),
            ("user_deploy_metadata", "JSONString"),
            ("raw_config", "String"),
        ],
    ),
    (
        "Mutation",
        "deploy_chain_atomic",
        &[
            ("chain_id", "String"),
            ("chain_name", "String"),
            ("environment", "String"),
            ("original_source_artifact_s3_key", "String"),
            ("team_id", "String"),
            ("is_draft", "Boolean"),
            ("allow_truss_download", "Boolean"),
            ("deployment_name", "String"),
            ("entrypoint", "ChainletInputAtomicGraphene!"),
            ("dependencies", "[ChainletInputAtomicGraphene]!"),
            ("truss_user_env", "String"),
        ],
    ),
];

const INPUT_TYPES: &[(&str, &[(&str, &str)])] = &[
    (
        "ChainletInputAtomicGraphene",
        &[
            ("name", "String!"),
            ("oracle", "OracleInputAtomicGraphene!"),
        ],
    ),
    (
        "OracleInputAtomicGraphene",
        &[
            ("model_name", "String!"),
            ("s3_key", "String!"),
            ("encoded_config_str", "String!"),
            ("semver_bump", "String"),
            ("version_name", "String"),
        ],
    ),
];

const ENUM_TYPES: &[(&str, &[&str])] = &[("ModelOrigin", &["BASETEN", "CHAINS"])];

const SCALARS: &[&str] = &[
    "String",
    "ID",
    "Int",
    "Float",
    "Boolean",
    "JSONString",
    "DateTime",
];

/// A GraphQL type reference.
#[derive(Clone, Debug, PartialEq)]
enum TypeRef {
    Named(String),
    List(Box<TypeRef>),
    NonNull(Box<TypeRef>),
}

impl TypeRef {
    fn parse(s: &str) -> TypeRef {
        if let Some(inner) = s.strip_suffix('!') {
            return TypeRef::NonNull(Box::new(TypeRef::parse(inner)));
        }
        if let Some(inner) = s.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
            return TypeRef::List(Box::new(TypeRef::parse(inner)));
        }
        TypeRef::Named(s.to_string())
    }

    fn from_ast(t: &Type<'_, String>) -> TypeRef {
        match t {
            Type::NamedType(n) => TypeRef::Named(n.clone()),
            Type::ListType(i) => TypeRef::List(Box::new(TypeRef::from_ast(i))),
            Type::NonNullType(i) => TypeRef::NonNull(Box::new(TypeRef::from_ast(i))),
        }
    }

    fn named(&self) -> &str {
        match self {
            TypeRef::Named(n) => n,
            TypeRef::List(i) | TypeRef::NonNull(i) => i.named(),
        }
    }

    fn nullable(&self) -> &TypeRef {
        match self {
            TypeRef::NonNull(i) => i,
            t => t,
        }
    }
}

impl std::fmt::Display for TypeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TypeRef::Named(n) => write!(f, "{n}"),
            TypeRef::List(i) => write!(f, "[{i}]"),
            TypeRef::NonNull(i) => write!(f, "{i}!"),
        }
    }
}

fn object_fields(type_name: &str) -> Option<&'static [(&'static str, &'static str)]> {
    OBJECT_TYPES
        .iter()
        .find(|(n, _)| *n == type_name)
        .map(|(_, f)| *f)
}

fn input_fields(type_name: &str) -> Option<&'static [(&'static str, &'static str)]> {
    INPUT_TYPES
        .iter()
        .find(|(n, _)| *n == type_name)
        .map(|(_, f)| *f)
}

fn enum_values(type_name: &str) -> Option<&'static [&'static str]> {
    ENUM_TYPES
        .iter()
        .find(|(n, _)| *n == type_name)
        .map(|(_, v)| *v)
}

fn is_input_type(name: &str) -> bool {
    SCALARS.contains(&name) || input_fields(name).is_some() || enum_values(name).is_some()
}

fn root_args(parent: &str, field: &str) -> &'static [(&'static str, &'static str)] {
    ROOT_ARGS
        .iter()
        .find(|(p, f, _)| *p == parent && *f == field)
        .map(|(_, _, a)| *a)
        .unwrap_or(&[])
}

/// One error in the platform's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct GqlError {
    pub message: String,
    pub line_col: Option<(usize, usize)>,
    pub path: Option<Vec<String>>,
    pub code: String,
}

impl GqlError {
    fn validation(message: impl Into<String>, pos: Option<(usize, usize)>) -> Self {
        Self {
            message: message.into(),
            line_col: pos,
            path: None,
            code: "GRAPHQL_VALIDATION_FAILED".into(),
        }
    }

    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("message".into(), json!(self.message));
        if let Some((line, column)) = self.line_col {
            o.insert(
                "locations".into(),
                json!([{"line": line, "column": column}]),
            );
        }
        if let Some(path) = &self.path {
            o.insert("path".into(), json!(path));
        }
        o.insert(
            "extensions".into(),
            json!({"code": self.code, "description": null}),
        );
        Value::Object(o)
    }
}

/// The response body for a list of errors.
pub fn error_body(errors: &[GqlError]) -> Value {
    json!({
        "data": null,
        "errors": errors.iter().map(GqlError::to_json).collect::<Vec<_>>(),
    })
}

/// A selected field, with fragments already expanded.
#[derive(Clone, Debug, PartialEq)]
pub struct Sel {
    /// Response key: the alias, else the field name.
    pub key: String,
    pub name: String,
    pub children: Vec<Sel>,
}

/// A root field call, arguments resolved to JSON.
#[derive(Clone, Debug)]
pub struct RootCall {
    pub key: String,
    pub name: String,
    pub args: Map<String, Value>,
    pub selection: Vec<Sel>,
    pub line_col: (usize, usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Query,
    Mutation,
}

impl OpKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Query => "query",
            OpKind::Mutation => "mutation",
        }
    }
}

/// A validated operation, ready to execute.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub kind: OpKind,
    pub operation_name: Option<String>,
    pub roots: Vec<RootCall>,
}

/// Parses `{"query", "variables", "operationName"}` and validates the
/// operation. `Err` carries the errors to answer with.
pub fn prepare(
    query: &str,
    variables: Option<&Map<String, Value>>,
    operation_name: Option<&str>,
) -> Result<Prepared, Vec<GqlError>> {
    let doc: Document<'_, String> =
        graphql_parser::parse_query(query).map_err(|e| vec![syntax_error(&e.to_string())])?;

    let mut fragments = BTreeMap::new();
    let mut ops = Vec::new();
    for def in &doc.definitions {
        match def {
            Definition::Fragment(f) => {
                fragments.insert(f.name.clone(), f);
            }
            Definition::Operation(op) => ops.push(op),
        }
    }
    let op =
        pick_operation(&ops, operation_name).map_err(|m| vec![GqlError::validation(m, None)])?;
    let (kind, name, var_defs, selection) = match op {
        OperationDefinition::SelectionSet(s) => (OpKind::Query, None, &[][..], s),
        OperationDefinition::Query(q) => (
            OpKind::Query,
            q.name.clone(),
            &q.variable_definitions[..],
            &q.selection_set,
        ),
        OperationDefinition::Mutation(m) => (
            OpKind::Mutation,
            m.name.clone(),
            &m.variable_definitions[..],
            &m.selection_set,
        ),
        OperationDefinition::Subscription(s) => {
            return Err(vec![GqlError::validation(
                "Subscriptions are not supported.",
                Some((s.position.line, s.position.column)),
            )]);
        }
    };

    let mut v = Validator {
        fragments,
        errors: Vec::new(),
        vars: BTreeMap::new(),
        used_vars: BTreeSet::new(),
        spread_stack: Vec::new(),
    };
    v.coerce_variables(var_defs, variables);
    let parent = match kind {
        OpKind::Query => "Query",
        OpKind::Mutation => "Mutation",
    };
    let roots = v.roots(parent, selection);
    for def in var_defs {
        if !v.used_vars.contains(&def.name) {
            let msg = match &name {
                Some(op) => format!(
                    "Variable \"${}\" is never used in operation \"{op}\".",
                    def.name
                ),
                None => format!("Variable \"${}\" is never used.", def.name),
            };
            v.errors.push(GqlError::validation(
                msg,
                Some((def.position.line, def.position.column)),
            ));
        }
    }
    if v.errors.is_empty() {
        Ok(Prepared {
            kind,
            operation_name: name,
            roots,
        })
    } else {
        Err(v.errors)
    }
}

/// A syntax error in graphql-core's words, from graphql-parser's message
/// (`query parse error: Parse error at 3:20\nUnexpected ...\nExpected ...`).
fn syntax_error(raw: &str) -> GqlError {
    let text = raw.strip_prefix("query parse error: ").unwrap_or(raw);
    let mut line_col = None;
    let mut details = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(pos) = line.strip_prefix("Parse error at ") {
            let mut it = pos.split(':').map(|n| n.trim().parse::<usize>().ok());
            if let (Some(Some(l)), Some(Some(c))) = (it.next(), it.next()) {
                line_col = Some((l, c));
            }
        } else {
            details.push(line.trim_end_matches('.').to_string());
        }
    }
    let detail = if details.is_empty() {
        "Unexpected input".to_string()
    } else {
        details.join(", ")
    };
    GqlError {
        message: format!("Syntax Error: {detail}."),
        line_col,
        path: None,
        code: "GRAPHQL_PARSE_FAILED".into(),
    }
}

fn pick_operation<'d, 'a>(
    ops: &[&'d OperationDefinition<'a, String>],
    wanted: Option<&str>,
) -> Result<&'d OperationDefinition<'a, String>, String> {
    let name_of = |op: &OperationDefinition<'a, String>| -> Option<String> {
        match op {
            OperationDefinition::SelectionSet(_) => None,
            OperationDefinition::Query(q) => q.name.clone(),
            OperationDefinition::Mutation(m) => m.name.clone(),
            OperationDefinition::Subscription(s) => s.name.clone(),
        }
    };
    match wanted {
        Some(w) => ops
            .iter()
            .find(|op| name_of(op).as_deref() == Some(w))
            .copied()
            .ok_or_else(|| format!("Unknown operation named \"{w}\".")),
        None => match ops {
            [one] => Ok(*one),
            [] => Err("Must provide an operation.".into()),
            _ => Err("Must provide operation name if query contains multiple operations.".into()),
        },
    }
}

struct Validator<'d, 'a> {
    fragments: BTreeMap<String, &'d FragmentDefinition<'a, String>>,
    errors: Vec<GqlError>,
    /// Declared variables: type and coerced value.
    vars: BTreeMap<String, (TypeRef, Value)>,
    used_vars: BTreeSet<String>,
    spread_stack: Vec<String>,
}

impl<'d, 'a> Validator<'d, 'a> {
    fn coerce_variables(
        &mut self,
        defs: &[VariableDefinition<'a, String>],
        provided: Option<&Map<String, Value>>,
    ) {
        for def in defs {
            let pos = Some((def.position.line, def.position.column));
            let ty = TypeRef::from_ast(&def.var_type);
            if !is_input_type(ty.named()) {
                self.errors.push(GqlError::validation(
                    format!("Unknown type \"{}\".", ty.named()),
                    pos,
                ));
                continue;
            }
            let given = provided.and_then(|p| p.get(&def.name));
            let value = match (given, &def.default_value) {
                (Some(v), _) => v.clone(),
                (None, Some(d)) => match literal_to_json(d) {
                    Ok(v) => v,
                    Err(m) => {
                        self.errors.push(GqlError::validation(m, pos));
                        continue;
                    }
                },
                (None, None) => Value::Null,
            };
            if value.is_null() && matches!(ty, TypeRef::NonNull(_)) {
                self.errors.push(GqlError::validation(
                    format!(
                        "Variable \"${}\" of required type \"{ty}\" was not provided.",
                        def.name
                    ),
                    pos,
                ));
                continue;
            }
            if let Err(why) = check_json(&ty, &value) {
                self.errors.push(GqlError::validation(
                    format!(
                        "Variable \"${}\" got invalid value {value}; {why}",
                        def.name
                    ),
                    pos,
                ));
                continue;
            }
            self.vars.insert(def.name.clone(), (ty, value));
        }
    }

    fn roots(&mut self, parent: &str, set: &'d SelectionSet<'a, String>) -> Vec<RootCall> {
        let mut out = Vec::new();
        for field in self.flatten(set) {
            let pos = (field.position.line, field.position.column);
            let Some(fty) = field_type_of(parent, &field.name) else {
                self.errors.push(GqlError::validation(
                    format!(
                        "Cannot query field \"{}\" on type \"{parent}\".",
                        field.name
                    ),
                    Some(pos),
                ));
                continue;
            };
            let args = self.arguments(parent, &field.name, &field.arguments, pos);
            let children = self.children(&fty, &field.name, &field.selection_set, pos);
            out.push(RootCall {
                key: field.alias.clone().unwrap_or_else(|| field.name.clone()),
                name: field.name.clone(),
                args,
                selection: children,
                line_col: pos,
            });
        }
        out
    }

    /// Fields of a selection set with fragment spreads and inline fragments
    /// expanded in place.
    fn flatten(&mut self, set: &'d SelectionSet<'a, String>) -> Vec<&'d Field<'a, String>> {
        let mut out = Vec::new();
        for item in &set.items {
            match item {
                Selection::Field(f) => out.push(f),
                Selection::InlineFragment(inl) => out.extend(self.flatten(&inl.selection_set)),
                Selection::FragmentSpread(sp) => {
                    let Some(frag) = self.fragments.get(&sp.fragment_name).copied() else {
                        self.errors.push(GqlError::validation(
                            format!("Unknown fragment \"{}\".", sp.fragment_name),
                            Some((sp.position.line, sp.position.column)),
                        ));
                        continue;
                    };
                    if self.spread_stack.contains(&sp.fragment_name) {
                        self.errors.push(GqlError::validation(
                            format!(
                                "Cannot spread fragment \"{}\" within itself.",
                                sp.fragment_name
                            ),
                            Some((sp.position.line, sp.position.column)),
                        ));
                        continue;
                    }
                    self.spread_stack.push(sp.fragment_name.clone());
                    out.extend(self.flatten(&frag.selection_set));
                    self.spread_stack.pop();
                }
            }
        }
        out
    }

    fn children(
        &mut self,
        field_type: &TypeRef,
        field_name: &str,
        set: &'d SelectionSet<'a, String>,
        pos: (usize, usize),
    ) -> Vec<Sel> {
        let type_name = field_type.named().to_string();
        let is_object = object_fields(&type_name).is_some();
        if !is_object {
            if !set.items.is_empty() {
                self.errors.push(GqlError::validation(
                    format!(
                        "Field \"{field_name}\" must not have a selection since type \"{field_type}\" has no subfields."
                    ),
                    Some(pos),
                ));
            }
            return Vec::new();
        }
        if set.items.is_empty() {
            self.errors.push(GqlError::validation(
                format!(
                    "Field \"{field_name}\" of type \"{field_type}\" must have a selection of subfields. Did you mean \"{field_name} {{ ... }}\"?"
                ),
                Some(pos),
            ));
            return Vec::new();
        }
        let mut out = Vec::new();
        for f in self.flatten(set) {
            let fpos = (f.position.line, f.position.column);
            let key = f.alias.clone().unwrap_or_else(|| f.name.clone());
            if f.name == "__typename" {
                out.push(Sel {
                    key,
                    name: f.name.clone(),
                    children: Vec::new(),
                });
                continue;
            }
            let Some(child_ty) = field_type_of(&type_name, &f.name) else {
                self.errors.push(GqlError::validation(
                    format!("Cannot query field \"{}\" on type \"{type_name}\".", f.name),
                    Some(fpos),
                ));
                continue;
            };
            for (arg, _) in &f.arguments {
                self.errors.push(GqlError::validation(
                    format!(
                        "Unknown argument \"{arg}\" on field \"{}\" of type \"{type_name}\".",
                        f.name
                    ),
                    Some(fpos),
                ));
            }
            let children = self.children(&child_ty, &f.name, &f.selection_set, fpos);
            out.push(Sel {
                key,
                name: f.name.clone(),
                children,
            });
        }
        out
    }

    fn arguments(
        &mut self,
        parent: &str,
        field: &str,
        given: &[(String, GValue<'a, String>)],
        pos: (usize, usize),
    ) -> Map<String, Value> {
        let schema = root_args(parent, field);
        let mut out = Map::new();
        let mut seen = BTreeSet::new();
        for (name, value) in given {
            if !seen.insert(name.clone()) {
                self.errors.push(GqlError::validation(
                    format!("There can be only one argument named \"{name}\"."),
                    Some(pos),
                ));
                continue;
            }
            let Some((_, ty)) = schema.iter().find(|(n, _)| n == name) else {
                self.errors.push(GqlError::validation(
                    format!(
                        "Unknown argument \"{name}\" on field \"{field}\" of type \"{parent}\"."
                    ),
                    Some(pos),
                ));
                continue;
            };
            let ty = TypeRef::parse(ty);
            match self.coerce_literal(&ty, value) {
                Ok(v) => {
                    out.insert(name.clone(), v);
                }
                Err(why) => self.errors.push(GqlError::validation(
                    format!("Argument \"{name}\" has invalid value {value}.\n{why}"),
                    Some(pos),
                )),
            }
        }
        for (name, ty) in schema {
            if ty.ends_with('!') && !out.contains_key(*name) && !seen.contains(*name) {
                self.errors.push(GqlError::validation(
                    format!(
                        "Field \"{field}\" argument \"{name}\" of type \"{ty}\" is required, but it was not provided."
                    ),
                    Some(pos),
                ));
            }
        }
        out
    }

    /// A literal (possibly holding variables) checked against `ty`.
    fn coerce_literal(
        &mut self,
        ty: &TypeRef,
        value: &GValue<'a, String>,
    ) -> Result<Value, String> {
        if let GValue::Variable(name) = value {
            self.used_vars.insert(name.clone());
            let Some((var_ty, v)) = self.vars.get(name) else {
                return Err(format!("Variable \"${name}\" is not defined."));
            };
            if !var_fits(var_ty, ty) {
                return Err(format!(
                    "Variable \"${name}\" of type \"{var_ty}\" used in position expecting type \"{ty}\"."
                ));
            }
            return Ok(v.clone());
        }
        match ty {
            TypeRef::NonNull(inner) => {
                if matches!(value, GValue::Null) {
                    return Err(format!("Expected \"{ty}\", found null."));
                }
                self.coerce_literal(inner, value)
            }
            _ if matches!(value, GValue::Null) => Ok(Value::Null),
            TypeRef::List(inner) => match value {
                GValue::List(items) => items
                    .iter()
                    .map(|i| self.coerce_literal(inner, i))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Value::Array),
                // A single item stands for a list of one (input coercion).
                other => Ok(Value::Array(vec![self.coerce_literal(inner, other)?])),
            },
            TypeRef::Named(n) => {
                if let Some(fields) = input_fields(n) {
                    let GValue::Object(obj) = value else {
                        return Err(format!("Expected type \"{n}\" to be an object."));
                    };
                    let mut out = Map::new();
                    for (k, v) in obj {
                        let Some((_, fty)) = fields.iter().find(|(f, _)| f == k) else {
                            return Err(format!("In field \"{k}\": Unknown field."));
                        };
                        let v = self
                            .coerce_literal(&TypeRef::parse(fty), v)
                            .map_err(|e| format!("In field \"{k}\": {e}"))?;
                        out.insert(k.clone(), v);
                    }
                    for (f, fty) in fields {
                        if fty.ends_with('!') && !out.contains_key(*f) {
                            return Err(format!(
                                "In field \"{f}\": Expected \"{fty}\", found null."
                            ));
                        }
                    }
                    return Ok(Value::Object(out));
                }
                if let Some(values) = enum_values(n) {
                    return match value {
                        GValue::Enum(e) if values.contains(&e.as_str()) => Ok(json!(e)),
                        _ => Err(format!("Expected type \"{n}\", found {value}.")),
                    };
                }
                let v = literal_to_json(value)?;
                check_scalar(n, &v)
                    .map_err(|_| format!("Expected type \"{n}\", found {value}."))?;
                Ok(v)
            }
        }
    }
}

/// Type of `field` on object type `parent`.
fn field_type_of(parent: &str, field: &str) -> Option<TypeRef> {
    object_fields(parent)?
        .iter()
        .find(|(n, _)| *n == field)
        .map(|(_, t)| TypeRef::parse(t))
}

/// Variable-in-position rule: same named type and list shape; a nullable
/// variable may not fill a non-null position.
fn var_fits(var: &TypeRef, pos: &TypeRef) -> bool {
    match (var, pos) {
        (TypeRef::NonNull(v), TypeRef::NonNull(p)) => var_fits(v, p),
        (TypeRef::NonNull(v), p) => var_fits(v, p),
        (_, TypeRef::NonNull(_)) => false,
        (TypeRef::List(v), TypeRef::List(p)) => var_fits(v, p),
        (TypeRef::Named(v), TypeRef::Named(p)) => v == p,
        _ => false,
    }
}

fn literal_to_json(v: &GValue<'_, String>) -> Result<Value, String> {
    Ok(match v {
        GValue::Variable(n) => return Err(format!("Variable \"${n}\" is not allowed here.")),
        GValue::Int(n) => json!(n.as_i64().unwrap_or_default()),
        GValue::Float(f) => json!(f),
        GValue::String(s) => json!(s),
        GValue::Boolean(b) => json!(b),
        GValue::Null => Value::Null,
        GValue::Enum(e) => json!(e),
        GValue::List(items) => Value::Array(
            items
                .iter()
                .map(literal_to_json)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        GValue::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| Ok((k.clone(), literal_to_json(v)?)))
                .collect::<Result<Map<_, _>, String>>()?,
        ),
    })
}

fn check_scalar(name: &str, v: &Value) -> Result<(), ()> {
    let ok = match name {
        "String" | "JSONString" | "DateTime" => v.is_string(),
        "ID" => v.is_string() || v.is_i64(),
        "Int" => v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        "Float" => v.is_number(),
        "Boolean" => v.is_boolean(),
        _ => true,
    };
    if ok { Ok(()) } else { Err(()) }
}

/// A variable's JSON value checked against its declared type.
fn check_json(ty: &TypeRef, v: &Value) -> Result<(), String> {
    match ty {
        TypeRef::NonNull(inner) => {
            if v.is_null() {
                return Err(format!(
                    "Expected non-nullable type \"{ty}\" not to be null."
                ));
            }
            check_json(inner, v)
        }
        _ if v.is_null() => Ok(()),
        TypeRef::List(inner) => match v {
            Value::Array(items) => items.iter().try_for_each(|i| check_json(inner, i)),
            other => check_json(inner, other),
        },
        TypeRef::Named(n) => {
            if let Some(fields) = input_fields(n) {
                let Value::Object(o) = v else {
                    return Err(format!("Expected type \"{n}\" to be an object."));
                };
                for k in o.keys() {
                    if !fields.iter().any(|(f, _)| f == k) {
                        return Err(format!("Field \"{k}\" is not defined by type \"{n}\"."));
                    }
                }
                for (f, fty) in fields {
                    check_json(&TypeRef::parse(fty), o.get(*f).unwrap_or(&Value::Null))
                        .map_err(|e| format!("In field \"{f}\": {e}"))?;
                }
                return Ok(());
            }
            if let Some(values) = enum_values(n) {
                return match v.as_str() {
                    Some(s) if values.contains(&s) => Ok(()),
                    _ => Err(format!("Expected type \"{n}\".")),
                };
            }
            check_scalar(n, v).map_err(|_| format!("Expected type \"{n}\"."))
        }
    }
}

/// The named type of a field's declared output type (for `__typename`).
pub fn output_type_name(parent: &str, field: &str) -> Option<String> {
    field_type_of(parent, field).map(|t| t.nullable().named().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errs(q: &str, vars: Value) -> Vec<String> {
        match prepare(q, vars.as_object(), None) {
            Ok(_) => Vec::new(),
            Err(e) => e.into_iter().map(|e| e.message).collect(),
        }
    }

    #[test]
    fn unescaped_quote_is_a_syntax_error_and_escaped_one_is_a_quote() {
        let bad = r#"{ model(name: "a"b") { id } }"#;
        let e = prepare(bad, None, None).unwrap_err();
        assert_eq!(e.len(), 1);
        assert!(
            e[0].message.starts_with("Syntax Error: "),
            "{}",
            e[0].message
        );
        assert_eq!(e[0].code, "GRAPHQL_PARSE_FAILED");
        let good = r#"{ model(name: "a\"b") { id } }"#;
        let p = prepare(good, None, None).unwrap();
        assert_eq!(p.roots[0].args["name"], "a\"b");
    }

    #[test]
    fn validation_messages_match_graphql_core() {
        for (q, want) in [
            (
                "{ teams { id nope } }",
                "Cannot query field \"nope\" on type \"TeamType\".",
            ),
            ("{ nope }", "Cannot query field \"nope\" on type \"Query\"."),
            (
                "{ teams }",
                "Field \"teams\" of type \"[TeamType]\" must have a selection of subfields. Did you mean \"teams { ... }\"?",
            ),
            (
                "{ teams { id { x } } }",
                "Field \"id\" must not have a selection since type \"ID!\" has no subfields.",
            ),
            (
                "{ chain { id } }",
                "Field \"chain\" argument \"id\" of type \"ID!\" is required, but it was not provided.",
            ),
            (
                "{ models(bogus: 1) { id } }",
                "Unknown argument \"bogus\" on field \"models\" of type \"Query\".",
            ),
            (
                "{ models(all: \"yes\") { id } }",
                "Argument \"all\" has invalid value \"yes\".\nExpected type \"Boolean\", found \"yes\".",
            ),
            (
                "{ chain(id: $x) { id } }",
                "Argument \"id\" has invalid value $x.\nVariable \"$x\" is not defined.",
            ),
            (
                "query ($v: String) { teams { id } }",
                "Variable \"$v\" is never used.",
            ),
        ] {
            let got = errs(q, json!({}));
            assert!(got.iter().any(|g| g == want), "{q}: got {got:?}");
        }
    }

    #[test]
    fn variables_are_substituted_and_type_checked() {
        let q = "query ($e: String) { truss_validation(config: \"e30=\", truss_user_env: $e) { success } }";
        let p = prepare(q, json!({"e": "{}"}).as_object(), None).unwrap();
        assert_eq!(p.roots[0].args["truss_user_env"], "{}");
        let p = prepare(q, json!({"e": null}).as_object(), None).unwrap();
        assert_eq!(p.roots[0].args["truss_user_env"], Value::Null);
        let got = errs(q, json!({"e": 5}));
        assert!(
            got[0].starts_with("Variable \"$e\" got invalid value 5"),
            "{got:?}"
        );
        let wrong = "query ($e: Int) { truss_validation(config: \"e30=\", truss_user_env: $e) { success } }";
        let got = errs(wrong, json!({"e": 5}));
        assert!(
            got[0].contains("used in position expecting type \"String\""),
            "{got:?}"
        );
    }

    #[test]
    fn input_objects_enums_and_lists() {
        let q = r#"mutation ($trussUserEnv: String) { deploy_chain_atomic(
            chain_name: "c" is_draft: false
            entrypoint: {name: "E", oracle: {model_name: "E-1", s3_key: "k", encoded_config_str: "e30=", semver_bump: "MINOR"}}
            dependencies: []
            truss_user_env: $trussUserEnv
        ) { chain_deployment { id chain { id hostname } } } }"#;
        let p = prepare(q, json!({"trussUserEnv": "{}"}).as_object(), None).unwrap();
        assert_eq!(p.kind, OpKind::Mutation);
        let args = &p.roots[0].args;
        assert_eq!(args["entrypoint"]["oracle"]["model_name"], "E-1");
        assert_eq!(args["dependencies"], json!([]));
        let bad = q.replace("semver_bump", "semver_bumpz");
        assert!(prepare(&bad, json!({"trussUserEnv": "{}"}).as_object(), None).is_err());
        let enum_ok = r#"mutation { create_model_from_truss(name: "m", s3_key: "k", config: "e30=", model_origin: CHAINS) { model_version { id } } }"#;
        assert_eq!(
            prepare(enum_ok, None, None).unwrap().roots[0].args["model_origin"],
            "CHAINS"
        );
        let enum_bad = enum_ok.replace("CHAINS", "\"CHAINS\"");
        assert!(prepare(&enum_bad, None, None).is_err());
    }

    #[test]
    fn named_operations_fragments_and_aliases() {
        let q = "query Teams { t: teams { ...F } } fragment F on TeamType { id name }";
        let p = prepare(q, None, None).unwrap();
        assert_eq!(p.operation_name.as_deref(), Some("Teams"));
        assert_eq!(p.roots[0].key, "t");
        let names: Vec<_> = p.roots[0]
            .selection
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names, ["id", "name"]);
        let two = "query A { teams { id } } query B { teams { name } }";
        assert!(prepare(two, None, None).is_err());
        assert_eq!(
            prepare(two, None, Some("B")).unwrap().roots[0].selection[0].name,
            "name"
        );
    }
}
