// SPDX-License-Identifier: MIT
// Stored text in the GUI and the HTML report: control characters (terminal escapes from a
// teammate's bundle) are shown as visible escapes, never passed on raw; HTML is escaped.
#include <QtTest>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/run.h"
#include "ampscope/storage/store.h"
#include "runlistmodel.h"
#include "report.h"
#include "uitext.h"

using namespace ampscope;

namespace {

const std::string kHostile =
    "\x1b]0;pwned\a\x1b[2J\xc2\x9b"
    "31m<b>mallory</b>";

bool hasRawControls(const QString& s, bool allowNewline) {
    for (const QChar c : s) {
        const auto u = c.unicode();
        if ((u < 0x20 && !(allowNewline && u == '\n')) || (u >= 0x7F && u <= 0x9F)) return true;
    }
    return false;
}

}  // namespace

class TstStoredText : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // The engine names the field it refuses, not a CLI flag: the GUI says it with its dialog's
    // label (was: "--keep-fp32: 'nomatch.*' matches no module", a flag GUI users never typed).
    void engineErrorsAreSaidWithTheDialogsLabels() {
        RunSpec spec;
        spec.model = "demo:mlp";
        spec.probes = "demo";
        spec.keep_fp32 = {"fc1", "nomatch.*"};
        try {
            run_comparison(spec, nullptr, nullptr);
            QFAIL("accepted a region that matches no module");
        } catch (const InputError& e) {
            QCOMPARE(QString::fromStdString(e.field()), QStringLiteral("keep_fp32[1]"));
            const QString text = ui::errorText(e);
            QVERIFY2(text.startsWith(QStringLiteral("Keep in FP32 (region 2): 'nomatch.*' matches no module")),
                     qPrintable(text));
            QVERIFY2(!text.contains(QStringLiteral("--")), qPrintable(text));
        }
        const InputError withFile("probes.csv", "labels", "expected integers");
        QCOMPARE(ui::errorText(withFile), QString::fromUtf8(withFile.what()));
        const std::runtime_error other("boom");
        QCOMPARE(ui::errorText(other), QStringLiteral("boom"));
    }

    void htmlTextEscapesControlsAndMarkup() {
        const QString h = ui::htmlText(kHostile);
        QVERIFY2(!hasRawControls(h, false), qPrintable(h));
        QVERIFY(h.contains(QStringLiteral("\\x1b]0;pwned\\x07\\x1b[2J\\u009b31m&lt;b&gt;mallory&lt;/b&gt;")));
        QCOMPARE(ui::htmlText("one\ntwo\x1b", true), QStringLiteral("one<br>two\\x1b"));
    }

    void overviewShowsNoRawControls() {
        RunResult r;
        r.run_id = "0123456789abcdef";
        r.model.source = kHostile;
        Review review;
        review.status = ReviewStatus::Accepted;
        review.by = kHostile;
        storage::Annotation note;
        note.author = kHostile;
        note.text = "\x1b[31mred\x1b[0m\nsecond line";
        const QString h = ui::overviewHtml(r, QStringLiteral("completed"), review, {note});
        QVERIFY2(!hasRawControls(h, false), qPrintable(h));
        QVERIFY(h.contains(QStringLiteral("\\x1b[31mred\\x1b[0m<br>second line")));
        QVERIFY(!h.contains(QStringLiteral("<b>mallory")));
        RunResult other = r;
        other.passes.resize(2);
        other.comparisons.resize(1);
        other.comparisons[0].precision = Precision::Fp16;
        other.passes[1].keep_fp32 = {kHostile};
        other.passes[1].origin = Origin{};
        other.passes[1].origin->module = kHostile;
        const QString c = ui::compareHtml(r, other);
        QVERIFY2(!hasRawControls(c, false), qPrintable(c));
        QVERIFY(!c.contains(QStringLiteral("<b>mallory")));
    }

    void runListShowsNoRawControls() {
        ui::RunListModel m;
        storage::RunRow row;
        row.uuid = "0123456789abcdef";
        row.model = kHostile;
        row.status = "completed\x1b[2J";
        m.resetData({row});
        for (int c = 0; c < m.columnCount(); ++c) {
            const QString s = m.index(0, c).data(Qt::DisplayRole).toString();
            QVERIFY2(!hasRawControls(s, false), qPrintable(s));
        }
        QVERIFY(m.index(0, ui::RunListModel::Model).data().toString().contains(QStringLiteral("\\x1b]0;pwned")));
    }
};

QTEST_MAIN(TstStoredText)
#include "tst_stored_text.moc"
