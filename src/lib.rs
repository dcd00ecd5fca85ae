//! truss-push library
