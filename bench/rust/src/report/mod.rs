//! What a run prints and writes: markdown tables in the shape of the
//! studies, SVG charts, and the comparison with an earlier run.

pub mod compare;
pub mod markdown;
pub mod svg;
