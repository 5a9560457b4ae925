//! A fuzzer for the decoders that read what a peer sends: frames
//! ([`hubwire_frame::Decoder`]), HELLO bodies ([`hubwire_frame::Hello`])
//! and MessagePack/JSON payloads ([`hubwire::Message::decode`]).
//!
//! It runs on stable Rust, with no compiler instrumentation: inputs start
//! from the spec's own vectors (`spec/vectors/*.json`) and are mutated
//! ([`mutate`]); an input whose *outcome* — the error code, the frame
//! types decoded, how far the decoder got — has not been seen before joins
//! the corpus and is mutated further ([`corpus`]). That is coarser than
//! coverage feedback, but it reaches the same error paths the vectors
//! name and every byte value around them, at millions of inputs a minute.
//!
//! Each target ([`targets`]) must never panic and checks properties, not
//! just survival: a frame split into any chunks decodes the same as whole;
//! what decodes re-encodes to bytes that decode to the same value; and the
//! memory a decoder takes stays within a small multiple of its input
//! ([`alloc`]; a length field announcing 4 GiB must not allocate it).
//!
//! | module | what |
//! |---|---|
//! | [`rng`] | a small seeded generator, so a run can be repeated |
//! | [`mutate`] | byte-level mutations: flips, interesting values, splices, length fields |
//! | [`seeds`] | starting inputs from `spec/vectors` |
//! | [`targets`] | the decoders under test and their properties |
//! | [`corpus`] | inputs kept because their outcome was new |
//! | [`alloc`] | a counting allocator: peak bytes during one input |
//! | [`run`] | the loop: mutate, run, keep, report; a failing input is saved |

pub mod alloc;
pub mod corpus;
pub mod mutate;
pub mod rng;
pub mod run;
pub mod seeds;
pub mod targets;
