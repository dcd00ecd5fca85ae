//! S3's XML, as far as the uploader needs it: the fields of an error
//! document, one element's text, and the CompleteMultipartUpload body.

/// An S3 error document's fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct S3Error {
    pub(super) code: Option<String>,
    pub(super) message: Option<String>,
    pub(super) region: Option<String>,
}

/// The error in an answer: any non-2xx status, or a 2xx whose document is an
/// `<Error>` (S3 does that for CompleteMultipartUpload).
pub(super) fn s3_error(status: u16, body: &str) -> Option<S3Error> {
    let is_error_document = root_element(body) == Some("Error");
    if (200..300).contains(&status) && !is_error_document {
        return None;
    }
    Some(S3Error {
        code: xml_text(body, "Code"),
        message: xml_text(body, "Message"),
        region: xml_text(body, "Region"),
    })
}

pub(super) fn root_element(body: &str) -> Option<&str> {
    let mut rest = body.trim_start();
    while let Some(after) = rest.strip_prefix("<?").or_else(|| rest.strip_prefix("<!")) {
        rest = after.split_once('>')?.1.trim_start();
    }
    let rest = rest.strip_prefix('<')?;
    let end = rest.find(|c: char| c == '>' || c == '/' || c.is_whitespace())?;
    Some(&rest[..end])
}

/// Text of the first `<tag>…</tag>`, entities decoded. Enough for S3's flat
/// answers; not a general XML parser.
pub(super) fn xml_text(body: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = body.find(&open)? + open.len();
    let len = body[start..].find(&close)?;
    Some(xml_unescape(body[start..start + len].trim()))
}

fn xml_unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// What CompleteMultipartUpload names of one stored part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct StoredPart {
    pub(super) number: u32,
    pub(super) etag: String,
    /// The part's CRC32 as S3 writes it; S3 refuses the list without it
    /// when the upload was created with a checksum algorithm.
    pub(super) checksum_crc32: String,
}

/// The CompleteMultipartUpload body; parts must already be in ascending order.
pub(super) fn complete_xml(parts: &[StoredPart]) -> String {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">",
    );
    for part in parts {
        xml.push_str(&format!(
            "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag><ChecksumCRC32>{}</ChecksumCRC32></Part>",
            part.number,
            xml_escape(&part.etag),
            xml_escape(&part.checksum_crc32),
        ));
    }
    xml.push_str("</CompleteMultipartUpload>");
    xml
}
