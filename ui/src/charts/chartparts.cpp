// SPDX-License-Identifier: MIT
#include "chartparts.h"

#include <QChart>
#include <QCursor>
#include <QIdentityProxyModel>
#include <QLogValueAxis>
#include <QRegularExpression>
#include <QPointer>
#include <QTimer>
#include <QToolTip>
#include <QVXYModelMapper>
#include <QXYSeries>

#include <algorithm>
#include <cmath>
#include <deque>

#include "charts.h"
#include "tablemodel.h"

namespace ampscope::ui::parts {

namespace {

/// Presents a model's plot role as DisplayRole, which is what QVXYModelMapper reads.
class PlotProxy : public QIdentityProxyModel {
public:
    PlotProxy(int role, QObject* parent) : QIdentityProxyModel(parent), role_(role) {}
    QVariant data(const QModelIndex& idx, int role) const override {
        return QIdentityProxyModel::data(idx, role == Qt::DisplayRole ? role_ : role);
    }

private:
    int role_;
};

}  // namespace

QLogValueAxis* logAxis(const QString& title, double lo, double hi) {
    auto* a = new QLogValueAxis;
    a->setTitleText(title);
    a->setBase(10);
    a->setLabelFormat(QStringLiteral("%.0e"));
    a->setRange(std::max(kPlotFloor, lo / 2), std::max(hi * 2, lo * 10));
    return a;
}

void attach(QChart* c, QAbstractSeries* s, QAbstractAxis* x, QAbstractAxis* y) {
    c->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
}

QChart* attach(QChart* c, std::initializer_list<QAbstractSeries*> series, QAbstractAxis* x, QAbstractAxis* y) {
    for (auto* s : series) attach(c, s, x, y);
    return c;
}

QChart* titled(const QString& title) {
    auto* c = new QChart;
    c->setTitle(title);
    return c;
}

QScatterSeries* markers(const QString& name, const QColor& colour, QScatterSeries::MarkerShape shape, double size) {
    auto* s = new QScatterSeries;
    s->setName(name);
    s->setColor(colour);
    s->setBorderColor(colour.darker(130));
    s->setMarkerShape(shape);
    s->setMarkerSize(size);
    return s;
}

void tipOnHover(QXYSeries* s, std::function<QString(qsizetype)> tip) {
    QObject::connect(s, &QXYSeries::hovered, s, [s, tip = std::move(tip)](const QPointF& p, bool on) {
        if (!on) {
            QToolTip::hideText();
            return;
        }
        const auto& pts = s->points();
        qsizetype best = -1;
        double bd = 0;
        const auto ly = [](double y) { return std::log10(std::max(y, kPlotFloor)); };
        for (qsizetype i = 0; i < pts.size(); ++i) {
            const double d = std::abs(pts[i].x() - p.x()) + std::abs(ly(pts[i].y()) - ly(p.y()));
            if (best < 0 || d < bd) {
                best = i;
                bd = d;
            }
        }
        if (best < 0) return;
        const QString text = tip(best);
        if (text.isEmpty()) return;
        s->setProperty("ampscopeTip", text);
        QToolTip::showText(QCursor::pos(), text);
    });
}

void mapSeries(QXYSeries* s, QAbstractItemModel* rows, int role, int x, int y, int summaryRole, int summaryColumn) {
    auto* plot = new PlotProxy(role, s);
    plot->setSourceModel(rows);
    auto* mapper = new QVXYModelMapper(s);
    mapper->setXColumn(x);
    mapper->setYColumn(y);
    mapper->setSeries(s);
    mapper->setModel(plot);
    tipOnHover(s, [rows, summaryRole, summaryColumn](qsizetype row) {
        return row < rows->rowCount() ? rows->index(int(row), summaryColumn).data(summaryRole).toString() : QString();
    });
}

namespace {

/// Updates of charts waiting for their turn: one per event-loop turn (a zero timer), so that a
/// chart's repaint (a posted event) runs between two charts' updates. A chart deleted while
/// waiting is skipped.
class RefreshQueue {
public:
    static RefreshQueue& instance() {
        static RefreshQueue q;
        return q;
    }
    void enqueue(QObject* owner, std::function<void()> update) {
        for (const auto& w : waiting_)
            if (w.first == owner) return;  // already waiting: it reads the model when it runs
        waiting_.emplace_back(owner, std::move(update));
        schedule();
    }

private:
    void schedule() {
        if (scheduled_ || waiting_.empty()) return;
        scheduled_ = true;
        QTimer::singleShot(0, [this] { runOne(); });
    }
    void runOne() {
        scheduled_ = false;
        while (!waiting_.empty()) {
            auto [owner, update] = std::move(waiting_.front());
            waiting_.pop_front();
            if (!owner) continue;
            update();
            break;
        }
        schedule();  // the next one in a later turn
    }
    std::deque<std::pair<QPointer<QObject>, std::function<void()>>> waiting_;
    bool scheduled_ = false;
};

}  // namespace

void inLaterTurn(QObject* owner, std::function<void()> work) {
    RefreshQueue::instance().enqueue(owner, std::move(work));
}

std::vector<qsizetype> thinToColumns(const QList<QPointF>& pts, int columns, const std::vector<bool>& marked) {
    const qsizetype n = pts.size();
    columns = std::max(columns, 1);
    std::vector<qsizetype> keep;
    keep.reserve(size_t(std::min<qsizetype>(n, 2 * qsizetype(columns) + 2)));
    if (n <= 2 * qsizetype(columns)) {
        for (qsizetype i = 0; i < n; ++i) keep.push_back(i);
        return keep;
    }
    const double x0 = pts.front().x(), span = pts.back().x() - x0;
    const auto column = [&](qsizetype i) {
        return span > 0 ? std::min(columns - 1, int((pts[i].x() - x0) / span * columns)) : 0;
    };
    for (qsizetype i = 0; i < n;) {
        const int c = column(i);
        qsizetype lo = i, hi = i, j = i;
        for (; j < n && column(j) == c; ++j) {
            if (pts[j].y() < pts[lo].y()) lo = j;
            if (pts[j].y() > pts[hi].y()) hi = j;
        }
        for (qsizetype k = i; k < j; ++k)
            if (k == lo || k == hi || k == 0 || k == n - 1 || (size_t(k) < marked.size() && marked[size_t(k)]))
                keep.push_back(k);
        i = j;
    }
    return keep;
}

void follow(QChart* chart, QAbstractItemModel* model, std::function<void()> update) {
    update();
    QObject::connect(model, &QAbstractItemModel::modelReset, chart, update);
    auto* later = new QTimer(chart);
    later->setSingleShot(true);
    later->setInterval(kLiveRefreshMs);
    QObject::connect(later, &QTimer::timeout, chart, [chart, update] { inLaterTurn(chart, update); });
    QObject::connect(model, &QAbstractItemModel::rowsInserted, later, [later] {
        if (!later->isActive()) later->start();
    });
}

QSortFilterProxyModel* rowsWhere(QAbstractItemModel* model, int column, const QString& regex, QObject* parent) {
    auto* f = new QSortFilterProxyModel(parent);
    f->setSourceModel(model);
    f->setFilterKeyColumn(column);
    f->setFilterRegularExpression(QRegularExpression(regex));
    return f;
}

}  // namespace ampscope::ui::parts
