//! The one shape of the crate's consuming builder setters.

/// Writes consuming builder setters: each `name(arg: Type) { field = value }` (with its doc
/// comment) becomes `pub fn name(mut self, arg: Type) -> Self` that sets `self.field` to
/// `value` and returns the builder. A setter that does more than one assignment (pushes to a
/// list, can fail) is written out by hand.
macro_rules! setters {
    ($(
        $(#[$attr:meta])*
        $name:ident($($arg:ident: $ty:ty),*) { $($field:ident).+ = $value:expr }
    )*) => {$(
        $(#[$attr])*
        pub fn $name(mut self, $($arg: $ty),*) -> Self {
            self.$($field).+ = $value;
            self
        }
    )*};
}
