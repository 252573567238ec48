//! moq-transport (placeholder).
