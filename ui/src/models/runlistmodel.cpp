// SPDX-License-Identifier: MIT
#include "runlistmodel.h"

#include "uitext.h"

namespace ampscope::ui {

void RunListModel::resetData(std::vector<storage::RunRow> rows) {
    beginResetModel();
    rows_ = std::move(rows);
    endResetModel();
}

void RunListModel::upsert(const storage::RunRow& row) {
    if (const auto* known = find(row.uuid)) {
        const int i = int(known - rows_.data());
        rows_[size_t(i)] = row;
        Q_EMIT dataChanged(index(i, 0), index(i, NUM_COLUMNS - 1));
        return;
    }
    beginInsertRows({}, int(rows_.size()), int(rows_.size()));
    rows_.push_back(row);
    endInsertRows();
}

const storage::RunRow* RunListModel::find(const std::string& uuid) const {
    for (const auto& r : rows_)
        if (r.uuid == uuid) return &r;
    return nullptr;
}

const storage::RunRow* RunListModel::row(int r) const {
    return r >= 0 && r < int(rows_.size()) ? &rows_[size_t(r)] : nullptr;
}

RunListModel::RunListModel(QObject* parent)
    : TableModel(parent, {QStringLiteral("Started"), QStringLiteral("Model"), QStringLiteral("Device"),
                          QStringLiteral("Passes"), QStringLiteral("Status"), QStringLiteral("Verdict"),
                          QStringLiteral("Review"), QStringLiteral("Notes"), QStringLiteral("Run")}) {}

QVariant RunListModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= int(rows_.size())) return {};
    const auto& r = rows_[size_t(idx.row())];
    if (role == UuidRole) return QString::fromStdString(r.uuid);  // a key, not shown
    if (role == Qt::DisplayRole || role == SortRole) {
        switch (idx.column()) {
            case Started:  // to the minute on screen (the browser stays narrow), to the second for sorting
                return storedText(r.started_at.substr(0, role == SortRole ? 19 : 16))
                    .replace(QLatin1Char('T'), QLatin1Char(' '));
            case Model: return storedText(r.model);
            case Device: return storedText(r.device);
            case Passes: return storedText(r.precisions);
            case Status: return storedText(r.status);
            case Verdict: return storedText(r.verdict.empty() ? std::string("-") : r.verdict);
            case Review: return storedText(to_string(r.review_status));
            case Notes:
                return role == SortRole ? QVariant(r.annotations)
                                        : QVariant(r.annotations ? QString::number(r.annotations) : QString());
            case Id: return storedText(r.uuid.substr(0, 8));
        }
    }
    if (role == Qt::ForegroundRole && idx.column() == Verdict) {
        if (r.verdict == "accepted") return goodColor();
        if (!r.verdict.empty()) return badColor();
    }
    if (role == Qt::ForegroundRole && idx.column() == Status && r.status != "completed" && r.status != "running")
        return badColor();
    if (role == Qt::ToolTipRole)
        return QString(storedText(r.uuid + ", started " + r.started_at + " on " + r.device) +
                       (r.error.empty() ? QString() : QLatin1Char('\n') + storedText(r.error)));
    return {};
}

}  // namespace ampscope::ui
