//! Entry points of the fuzz targets (fuzz/fuzz_targets/): the decoders of
//! this module run on bytes as a hostile peer or a planted file would hand
//! them, through the same code the client runs. Not an API: plain data out,
//! errors as text, for the targets' properties.

use super::{checkpoint, proto, Error};
use crate::wire::hpack;

/// A header field as bytes.
pub type Field = (Vec<u8>, Vec<u8>);

/// Each of `blocks` decoded on one decoder, in order (the dynamic table
/// carried from block to block, as a connection's blocks carry it): its
/// fields, or why it did not decode. After an error the decoder is left as
/// the failed block left it, as a connection would not be (it closes).
pub fn hpack_blocks(blocks: &[&[u8]], list_limit: usize) -> Vec<Result<Vec<Field>, String>> {
    let mut d = hpack::Decoder::new(hpack::TABLE_SIZE);
    blocks
        .iter()
        .map(|b| {
            let mut fields = Vec::new();
            d.decode(b, list_limit, |n, v| fields.push((n.to_vec(), v.to_vec())))
                .map(|()| fields)
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// `fields` as the encoder writes them (literals without indexing).
pub fn hpack_encode(fields: &[Field]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in fields {
        hpack::put_literal_bytes(&mut out, n, v);
    }
    out
}

/// (resource, ID) pairs, in wire order.
pub type Pairs = Vec<(String, String)>;

/// A List answer: the first pod of (namespace, name)'s devices, and how
/// many pods of the List are (namespace, name).
pub type Listed = (Option<Pairs>, usize);

/// A Get answer: the pod's namespace, name and devices.
pub type Got = Option<(String, String, Pairs)>;

/// [`Listed`] of the List answer `msg`.
pub fn list(msg: &[u8], namespace: &str, name: &str) -> Result<Listed, String> {
    let (pod, n) = proto::list_find(msg, namespace, name).map_err(|e| e.to_string())?;
    let devices = pod.map(|p| devices_of(&p)).transpose()?;
    Ok((devices, n))
}

/// [`Got`] of the Get answer `msg`.
pub fn get(msg: &[u8]) -> Result<Got, String> {
    let Some(pod) = proto::get_response(msg).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let devices = devices_of(&pod)?;
    Ok(Some((
        pod.namespace.to_owned(),
        pod.name.to_owned(),
        devices,
    )))
}

fn devices_of(pod: &proto::Pod) -> Result<Pairs, String> {
    let mut out = Vec::new();
    pod.devices(|r, id| out.push((r.to_owned(), id.to_owned())))
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// The checkpoint's devices of pod `uid`, each (resource, ID) once.
pub fn checkpoint(buf: &[u8], uid: &str) -> Result<Option<Pairs>, String> {
    match checkpoint::parse(buf, uid) {
        Ok(found) => Ok(found.map(|d| d.devices.into_iter().map(|d| (d.resource, d.id)).collect())),
        Err(e @ Error::Protocol(_)) => Err(e.to_string()),
        Err(e) => Err(format!("{e:?}")),
    }
}
