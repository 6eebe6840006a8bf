# The sessionledger image: the library, the `sessionledger` command and the worker roles.
# Build: docker build -t sessionledger .   (docker compose up builds it for you)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY domain ./domain
COPY infrastructure ./infrastructure
COPY workers ./workers
COPY sessionledger ./sessionledger
COPY LICENSE ./
RUN pip install . \
    && useradd --create-home --uid 1000 sessionledger
USER sessionledger

# The role is the argument: ingest | tasks | relay | all (see workers/launch.py).
ENTRYPOINT ["python", "-m", "sessionledger.workers.launch"]
CMD ["all"]
