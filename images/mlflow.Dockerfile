# The MLflow tracking server: the official image plus the PostgreSQL driver (psycopg 3, as
# the manifests' postgresql+psycopg:// URI names it) and boto3 for S3 artifacts; the
# versions are requirements.lock's.
FROM ghcr.io/mlflow/mlflow:v3.17.2

ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 HOME=/home/mlflow

RUN pip install --no-cache-dir "psycopg[binary]==3.3.9" boto3==1.44.5 \
    && useradd --create-home --home-dir /home/mlflow --uid 10002 mlflow

USER 10002:10002
EXPOSE 5000
ENTRYPOINT ["mlflow", "server"]
CMD ["--host", "0.0.0.0", "--port", "5000"]
