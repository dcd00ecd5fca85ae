//! A faithful fake of Baseten for truss-push's tests: GraphQL, REST v1,
//! S3 uploads and inference on one loopback port.

pub mod s3;
