"""parse_file reads real files of each type inside its roots and refuses escapes."""

import os

import pytest

from hymem.tools import Toolbox, file_tool


def _pdf(path, text):
    """A minimal one-page PDF with one line of text (Helvetica)."""
    stream = f"BT /F1 18 Tf 50 700 Td ({text}) Tj ET".encode()
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    path.write_bytes(bytes(out))


@pytest.fixture
def root(tmp_path):
    import docx
    import openpyxl

    r = tmp_path / "files"
    r.mkdir()
    _pdf(r / "report.pdf", "Revenue grew 42 percent in 2021")
    d = docx.Document()
    d.add_paragraph("The meeting is on Tuesday in Velmor.")
    d.save(r / "memo.docx")
    wb = openpyxl.Workbook()
    wb.active.append(["city", "population"])
    wb.active.append(["Ostra", 12000])
    wb.save(r / "table.xlsx")
    (r / "data.csv").write_text("name,year\nAda,1790\n")
    (r / "page.html").write_text("<html><script>evil()</script><nav>Menu</nav><p>Founded in <b>1821</b>.</p></html>")
    (r / "notes.txt").write_text("plain text notes")
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    os.symlink(tmp_path / "secret.txt", r / "link.txt")
    return r


def test_reads_each_file_type(root):
    tools = Toolbox([file_tool([str(root)])])

    def read(name):
        ok, text = tools.call("parse_file", {"file_path": name})
        assert ok, text
        return text

    assert "Revenue grew 42 percent in 2021" in read("report.pdf")
    assert "Tuesday in Velmor" in read("memo.docx")
    assert "Ostra\t12000" in read("table.xlsx")
    assert "Ada\t1790" in read("data.csv")
    html = read(str(root / "page.html"))
    assert "Founded in" in html and "1821" in html and "evil" not in html and "Menu" not in html
    assert read("notes.txt") == "plain text notes"


def test_escapes_are_refused(root, tmp_path):
    tools = Toolbox([file_tool([str(root)])])
    for path in ("../secret.txt", str(tmp_path / "secret.txt"), "link.txt", "/etc/passwd",
                 "sub/../../secret.txt"):
        ok, text = tools.call("parse_file", {"file_path": path})
        assert not ok and "outside the readable directories" in text and "TOP SECRET" not in text
    ok, text = tools.call("parse_file", {"file_path": "missing.pdf"})
    assert not ok and "does not exist" in text
    ok, text = tools.call("parse_file", {"path": "notes.txt"})
    assert not ok and "missing argument(s) ['file_path']" in text
