//! moq-relay (placeholder).
