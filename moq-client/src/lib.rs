//! moq-client (placeholder).
